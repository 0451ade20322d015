"""The README's examples (examples/*.py) run against the testbed, so they stay true."""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from ordo.epochs.log import ensure_log_topics
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import consume
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.pods import PodSet
from ordo_testbed.resources import Groups
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed
EXAMPLES = Path(__file__).parents[2] / "examples"


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ordered_pipeline(kafka: KafkaHandle, log_topics: tuple[str, str]) -> None:
    epochs, registry = log_topics
    topic = kafka.create_topic(3)
    pipeline = example("ordered_pipeline")
    pipeline.produce(kafka.bootstrap, topic, 300, epoch_topic=epochs, registry_topic=registry)
    seen = pipeline.consume(kafka.bootstrap, topic, kafka.topic("g"), 300, epoch_topic=epochs)
    assert sorted(seen, key=lambda v: int(v.split("-")[1])) == [f"order-{i}" for i in range(300)]


def test_async_processing(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(3)
    from confluent_kafka import Producer

    producer = Producer(kafka.config())
    for i in range(500):
        producer.produce(topic, b"x", f"k{i % 20}".encode())
    assert producer.flush(10) == 0
    assert example("async_processing").process_all(kafka.bootstrap, topic, kafka.topic("g"), 500) == 500


def test_async_processing_through_a_rebalance(kafka: KafkaHandle) -> None:
    """A second member joins mid-run: each revocation must complete once its work is done (the
    example delays only unfinished partitions), not run to revoke_timeout (60 s) and end lost;
    and every record is processed once."""
    partitions, per_partition = 4, 500
    topic = kafka.create_topic(partitions)
    from confluent_kafka import Message, Producer

    producer = Producer(kafka.config(linger_ms=5))
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, b"x", f"k{i % 10}".encode(), partition=p)
    assert producer.flush(10) == 0
    module, group = example("async_processing"), kafka.topic("g")
    seen: Counter[tuple[int, int]] = Counter()
    lock = threading.Lock()

    def work(record: Message) -> None:
        time.sleep(0.005)  # the processing: records are still out when the revocation comes
        with lock:
            seen[(record.partition() or 0, record.offset() or 0)] += 1

    stop = threading.Event()
    first, second = module.connect(kafka.bootstrap, topic, group), None
    threads = [threading.Thread(target=module.run, args=(first, work, stop))]
    threads[0].start()
    try:
        wait_for(lambda: len(seen) >= 300, 30, "the first member to be under way")
        second = module.connect(kafka.bootstrap, topic, group)
        threads.append(threading.Thread(target=module.run, args=(second, work, stop)))
        threads[1].start()
        # promptly: well inside revoke_timeout (60 s), which the old example always ran to
        wait_for(lambda: second.assignment(), 30, "the second member to own partitions")
        wait_for(lambda: len(seen) == partitions * per_partition, 30, "every record processed")
    finally:
        stop.set()
        for thread in threads:
            thread.join(40)
    assert set(seen.values()) == {1}, f"processed twice: {[k for k, n in seen.items() if n > 1][:5]}"
    assert first.revocation_waits and max(first.revocation_waits) < 30


def test_exactly_once_transform(kafka: KafkaHandle, log_topics: tuple[str, str]) -> None:
    epochs, registry = log_topics
    source, target = kafka.create_topic(2), kafka.create_topic(2)
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(kafka.config())
    for i in range(200):
        producer.produce(source, f"v{i}".encode(), f"k{i}".encode())
    assert producer.flush(10) == 0
    done = example("exactly_once_transform").transform(
        kafka.bootstrap, source, target, kafka.topic("g"), 200, epoch_topic=epochs, registry_topic=registry
    )
    assert done == 200
    reader = Consumer(kafka.config(group_id=kafka.topic("v"), isolation_level="read_committed"))
    reader.assign([TopicPartition(target, p, 0) for p in range(2)])
    values = sorted((m.value() or b"").decode() for m in consume(reader, 200))
    reader.close()
    assert values == sorted(f"V{i}" for i in range(200))


def test_group_member(
    kafka: KafkaHandle, kube: Kube, pods: PodSet, operator_process: Callable[..., OperatorProcess]
) -> None:
    ensure_log_topics(kafka.admin)  # the example uses ordo's default log topic names
    operator = operator_process(
        ORDO_EPOCH_TOPIC="__ordo_epochs", ORDO_REGISTRY_TOPIC="__ordo_producers"
    ).start()
    topic = kafka.create_topic(2)
    groups = Groups(kube.custom, kube.namespace)
    checkpoints = kafka.topic("checkpoints")
    groups.create("example", 2, {"app": "example"}, sessionTimeoutSeconds=5, checkpointTopic=checkpoints)
    argv = [sys.executable, str(EXAMPLES / "group_member.py"), topic, "120"]
    member = pods.start(
        "member-0",
        argv,
        labels={"app": "example"},
        env={"ORDO_GROUP": "example", "ORDO_KAFKA_BOOTSTRAP": kafka.bootstrap},
    )
    try:
        wait_for(
            lambda: (
                [c.get("checkpoint") for c in groups.status("example").get("checkpoints") or []]
                == ["120", "120"]
            ),
            90,
            "both source partitions copied",
        )
    finally:
        member.sigterm()
        operator.stop()
    assert member.wait(30) in (0, 143), member.stderr()[-2000:]
