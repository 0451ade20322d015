"""Keys that stay are never stalled (issue 43 item 2): two producer processes write 400 keys while
the operator grows the topic 4 -> 8. During the fence the keys whose partition 8 partitions keep
(murmur2 % 4 == murmur2 % 8, half of them) are written on; the moved keys' records wait and go by
the new count once the epoch is published.

The fault proxy holds the operator's writes to the epoch log 1.5 s each (the producers reach the
broker beside it), so the fence lasts that long after the thresholds are read: a record stamped
(CreateTime, set when produce() takes it) between the publish's stamp and its arrival was taken
during the fence. Judged from what reached Kafka: staying keys' records stamped then exist, moved
keys' do not, and the independent verifier and a fresh GatedConsumer group find nothing
reordered, lost, doubled or misplaced.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from ordo.partitioners import murmur2_partition
from ordo.verify.topic import check_topic, read_epochs, read_topic
from ordo_sandbox.scenario.verify import read_acknowledged
from ordo_sandbox.scenario.workload import Workload
from ordo_testbed.kafka import Fault
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import await_records
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.records import RECORDS
from ordo_testbed.resources import Expansions

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

HELD = 1.5  # seconds each epoch-log write of the operator's is held at the proxy


def _read_all(kafka: KafkaHandle, topic: str, partitions: int) -> Iterator[Any]:
    """Every committed record of ``topic`` (from its start to its end now)."""
    reader = Consumer(kafka.config(group_id=kafka.topic("g"), enable_partition_eof=True))
    try:
        reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        ended: set[int] = set()
        while len(ended) < partitions:
            for message in reader.consume(500, 1.0):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    ended.add(message.partition())  # type: ignore[arg-type]
                elif error is None:
                    yield message
    finally:
        reader.close()


def _publish_stamp(kafka: KafkaHandle, epochs: str, topic: str) -> float:
    """When the operator's write that published epoch 1 of ``topic`` was stamped (seconds)."""
    for message in _read_all(kafka, epochs, 1):
        if message.key() == topic.encode():
            history = json.loads(message.value())
            if history["epochs"][-1]["state"] == "active" and history["epochs"][-1]["epoch"] == 1:
                return float(message.timestamp()[1]) / 1000
    raise AssertionError("the epoch log holds no publish of epoch 1")


@pytest.mark.parametrize("fencing", ["broker", "lease"])
def test_staying_keys_are_written_during_the_fence_and_moved_keys_wait(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
    tmp_path: Path,
    fencing: str,
) -> None:
    epochs, registry = log_topics
    operator: OperatorProcess = operator_process().start()
    grow = Expansions(kube.custom, kube.namespace)
    topic = kafka.create_topic(4)
    workload = Workload(
        kafka.direct_bootstrap, topic, tmp_path, producers=2, consumers=2, keys=400, rate=1500,
        epoch_topic=epochs, registry_topic=registry, producer_options=["--fencing", fencing],
    )  # fmt: skip
    try:
        workload.start_producers()
        await_records(kafka.bootstrap, topic, 4, 1500)
        held = kafka.faults.add(Fault(api="Produce", topic=epochs, delay=HELD))
        grow.create("grow", topic, 8, fenceTimeoutSeconds=60)
        grow.wait_phase("grow", "Completed", 60)
        kafka.faults.remove(held.id)
        assert held.hits >= 2, "the fence's and the publish's writes were held"
        await_records(kafka.bootstrap, topic, 8, 1500)
    finally:
        workload.stop_producers()
        operator.stop()

    published = _publish_stamp(kafka, epochs, topic)
    during: dict[bool, int] = {True: 0, False: 0}  # staying? -> records taken while the publish was held
    for message in _read_all(kafka, topic, 8):
        stamped = message.timestamp()[1] / 1000
        if published + 0.1 < stamped < published + HELD - 0.3:
            key = message.key()
            assert key is not None
            during[murmur2_partition(key, 4) == murmur2_partition(key, 8)] += 1
    print(
        f"records taken during the fence after the thresholds: staying {during[True]}, moved {during[False]}"
    )
    assert during[True] > 100, "staying keys were written on during the fence"
    assert during[False] == 0, "a moved key's record was taken by the old count during the fence"

    read = read_topic(kafka.config(), topic, layout=RECORDS)
    stored = check_topic(topic, read.records, read_epochs(kafka.config(), topic, epochs))
    print("verifier:", stored.summary(), stored.examples)
    assert read.unreadable == 0 and stored.duplicates == 0
    assert stored.order_violations == 0 and stored.misplaced == 0, stored.examples
    acknowledged = set(read_acknowledged(workload.delivered_paths()))
    assert acknowledged <= {(r.key, r.seq) for r in read.records}, "an acknowledged record is not in Kafka"
    workload.start_consumers()  # a GatedConsumer group of its own, from the beginning of the topic
    assert workload.drain(len(acknowledged), timeout=90), workload.why_not_drained(len(acknowledged))
    verdict = workload.stop()
    print("gated consumers:", verdict.summary(), verdict.examples)
    assert verdict.order_violations == 0 and verdict.lost == 0, verdict.examples
