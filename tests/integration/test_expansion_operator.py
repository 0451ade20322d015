"""The OrderedTopicExpansion operator end to end: kopf, kube-apiserver, Kafka, real producers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from ordo.epochs import EpochState
from ordo.epochs.liveness import ProducerReport
from ordo.epochs.log import read_history
from ordo.ordered_producer import OrderedProducer
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import wait_for
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions

pytestmark = pytest.mark.testbed


@dataclass
class Env:
    kafka: KafkaHandle
    kube: Kube
    operator: OperatorProcess
    epochs: str
    registry: str

    @property
    def expansions(self) -> Expansions:
        return Expansions(self.kube.custom, self.kube.namespace)

    def expansion(self, name: str, topic: str, partitions: int, **spec: Any) -> None:
        self.expansions.create(name, topic, partitions, **spec)

    def wait_phase(self, name: str, phase: str, timeout: float = 60) -> dict[str, Any]:
        return self.expansions.wait_phase(name, phase, timeout)

    def producer(self, **kw: Any) -> OrderedProducer:
        return OrderedProducer(
            self.kafka.config(linger_ms=2),
            epoch_topic=self.epochs,
            registry_topic=self.registry,
            session_timeout=3.0,
            **kw,
        )

    def events(self) -> list[str]:
        return self.kube.event_reasons()

    def wait_events(self, *reasons: str) -> None:
        """kopf posts Events in the background: wait for them rather than expect them at once."""
        wait_for(lambda: set(reasons) <= set(self.events()), 15, f"events {reasons}")


@pytest.fixture
def env(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
) -> Iterator[Env]:
    operator = operator_process(ORDO_MAX_PARTITIONS="64").start()
    try:
        yield Env(kafka, kube, operator, *log_topics)
    finally:
        operator.stop()
        print(operator.log_text()[-4000:])


def _keep_producing(producer: OrderedProducer, topic: str, stop: threading.Event, sent: list[int]) -> None:
    i = 0
    while not stop.is_set():
        try:
            producer.produce(topic, str(i).encode(), key=f"k{i % 50}".encode())
        except BufferError:  # librdkafka's queue is full: let deliveries catch up, as a client does
            producer.poll(0.1)
            continue
        i += 1
        if i % 100 == 0:
            producer.poll(0)
            time.sleep(0.001)  # a steady rate, not synchronisation
    sent.append(i)


def test_expansion_under_load_completes_and_producers_switch(env: Env) -> None:
    topic = env.kafka.create_topic(3)
    producers = [env.producer(), env.producer()]
    stop = threading.Event()
    sent: list[int] = []
    threads = [threading.Thread(target=_keep_producing, args=(p, topic, stop, sent)) for p in producers]
    for t in threads:
        t.start()
    try:
        env.expansion("grow", topic, 6)
        status = env.wait_phase("grow", "Completed")
        wait_for(lambda: all(p.partitions_for(topic) == 6 for p in producers), 15, "producers to use 6")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        for p in producers:
            p.close()
    assert status["fromPartitions"] == 3 and status["toPartitions"] == 6 and status["epoch"] == 1
    assert set(status["thresholds"]) == {"0", "1", "2"} and status["fenceWaitSeconds"] >= 0
    # the partitions were created and served before the fence: producers paused for less than it all
    assert status["startedAt"] <= status["fencedAt"] and status["pausedSeconds"] <= status["durationSeconds"]
    assert "prior" not in status  # it follows from the counts; stored, it outgrew the object at scale
    assert [c["status"] for c in status["conditions"] if c["type"] == "Ready"] == ["True"]
    assert env.kafka.admin.list_topics(timeout=10).topics[topic].partitions.keys() == set(range(6))
    history = read_history(env.kafka.config(), env.epochs, topic)
    assert history.active.partitions == 6
    assert history.active.thresholds == {int(p): o for p, o in status["thresholds"].items()}
    assert sum(sent) > 0
    env.wait_events("CreatingPartitions", "Fencing", "Fenced", "Completed")


@pytest.mark.parametrize(
    ("partitions", "topic_partitions", "reason", "message"),
    [
        (3, 3, "NotLarger", "target 3 partitions must be larger than today's 3"),
        (2, 3, "NotLarger", "must be larger"),
        (65, 3, "TooManyPartitions", "exceed the configured maximum of 64"),
        (6, None, "TopicNotFound", "does not exist"),
    ],
)
def test_invalid_expansions_fail_and_change_nothing(
    env: Env, partitions: int, topic_partitions: int | None, reason: str, message: str
) -> None:
    topic = env.kafka.create_topic(topic_partitions) if topic_partitions else env.kafka.topic("absent")
    env.expansion("bad", topic, partitions)
    status = env.wait_phase("bad", "Failed")
    assert message in status["message"]
    env.wait_events(reason)
    topics = env.kafka.admin.list_topics(timeout=10).topics
    if topic_partitions:
        assert len(topics[topic].partitions) == topic_partitions
    else:
        assert topic not in topics


def test_a_producer_that_never_acknowledges_aborts_the_expansion(env: Env) -> None:
    topic = env.kafka.create_topic(3)
    stubborn = ProducerReport(
        producer_id="stubborn",
        topics=(topic,),
        session_timeout_ms=60_000,
        reported_at_ms=int(time.time() * 1000),
    )
    from confluent_kafka import Producer

    raw = Producer(env.kafka.config())
    raw.produce(env.registry, key=b"stubborn", value=stubborn.model_dump_json().encode())
    assert raw.flush(10) == 0
    with env.producer() as producer:
        producer.produce(topic, b"x", key=b"k")
        env.expansion("stuck", topic, 6, fenceTimeoutSeconds=2)
        status = env.wait_phase("stuck", "Aborted")
        assert "stubborn" in status["message"]
        # created before the fence, the partitions stay (Kafka cannot remove them); no epoch has them
        assert len(env.kafka.admin.list_topics(timeout=10).topics[topic].partitions) == 6
        producer.produce(topic, b"after", key=b"k")  # resumed at the old count
        assert producer.partitions_for(topic) == 3
    assert read_history(env.kafka.config(), env.epochs, topic).current.state == EpochState.ABORTED


def test_a_second_expansion_of_the_topic_waits_for_the_first(env: Env) -> None:
    topic = env.kafka.create_topic(3)
    env.expansion("first", topic, 4)
    # the operator has taken the first up: the second, created now, is the one that must wait
    wait_for(
        lambda: env.expansions.status("first").get("phase") not in (None, "Pending"), 30, "first to start"
    )
    env.expansion("second", topic, 8)
    first = env.wait_phase("first", "Completed")
    second = env.wait_phase("second", "Completed")
    assert (first["fromPartitions"], first["toPartitions"]) == (3, 4)
    assert (second["fromPartitions"], second["toPartitions"], second["epoch"]) == (4, 8, 2)


def test_a_topic_of_round_robin_producers_only_is_expanded_without_a_fence(env: Env) -> None:
    topic = env.kafka.create_topic(3)
    with env.producer(partitioner="round_robin") as producer:
        producer.produce(topic, b"x")
        env.expansion("direct", topic, 5)
        status = env.wait_phase("direct", "Completed")
        assert "fenceWaitSeconds" not in status, "nothing to gate: no fence"
        env.wait_events("NothingToGate")
        wait_for(lambda: producer.partitions_for(topic) == 5, 15, "the producer to use 5 partitions")


def test_partitions_added_outside_ordo_are_reported_and_an_expansion_covers_them(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After ordo grew a topic 2 -> 4, someone adds partitions 4 and 5 with the admin API. The
    operator sets PartitionsInSync=False with a Warning Event; a GatedConsumer holds the records
    of partition 5 and says why; an OrderedTopicExpansion to 6 (as the message advises) covers
    them with an epoch and the consumer gets them."""
    from confluent_kafka import Producer, TopicPartition

    from ordo import gated_consumer
    from ordo.gated_consumer import GatedConsumer

    epochs, _ = log_topics
    operator = operator_process(ORDO_PARTITIONS_CHECK_SECONDS="1").start()
    expansions = Expansions(kube.custom, kube.namespace)
    try:
        topic = kafka.create_topic(2)
        expansions.create("grow", topic, 4)
        expansions.wait_phase("grow", "Completed")

        def in_sync() -> str | None:
            found = [
                c for c in expansions.status("grow").get("conditions", []) if c["type"] == "PartitionsInSync"
            ]
            return found[0]["status"] if found else None

        assert wait_for(in_sync, 30, "the first partitions check") == "True"
        kafka.grow(topic, 6)
        producer = Producer(kafka.config())
        producer.produce(topic, b"outside", partition=5)
        assert producer.flush(10) == 0

        wait_for(lambda: in_sync() == "False", 30, "PartitionsInSync=False")
        condition = next(
            c for c in expansions.status("grow")["conditions"] if c["type"] == "PartitionsInSync"
        )
        assert condition["reason"] == "PartitionsAddedOutsideOrdo"
        assert "partitions 4..5 were added outside ordo" in condition["message"]
        wait_for(lambda: kube.events("PartitionsAddedOutsideOrdo"), 15, "the Warning Event")

        monkeypatch.setattr(gated_consumer, "UNKNOWN_PARTITION_GRACE", 0.5)
        config = kafka.config(group_id=kafka.topic("g"), auto_offset_reset="earliest")
        consumer = GatedConsumer(
            config, [topic], epoch_topic=epochs, assignment=[TopicPartition(topic, 5, 0)]
        )
        got: list[bytes] = []
        try:

            def warned() -> bool:
                got.extend(m.value() or b"" for m in consumer.consume(10, 0.1) if m.error() is None)
                return any("added outside ordo" in r.getMessage() for r in caplog.records)

            wait_for(warned, 30, "the consumer's warning")
            assert got == [] and consumer.closed_gates()[(topic, 5)].unknown_epoch

            expansions.create("cover", topic, 6)
            expansions.wait_phase("cover", "Completed")

            def delivered() -> bool:
                got.extend(m.value() or b"" for m in consumer.consume(10, 0.1) if m.error() is None)
                return bool(got)

            wait_for(delivered, 30, "the held record once an epoch covers partition 5")
            assert got == [b"outside"]
        finally:
            consumer.close()
        wait_for(lambda: in_sync() == "True", 30, "the first expansion to say a later one covers the topic")
    finally:
        operator.stop()
