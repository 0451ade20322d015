"""The operator's Kafka side against the real broker: what it promises before an epoch is published."""

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from ordo import OrderedProducer
from ordo.epochs.liveness import ProducerReport
from ordo_operator.config import OperatorConfig
from ordo_operator.kafka import KafkaSide
from ordo_testbed.kafka.faults import Fault
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import wait_for
from ordo_testbed.operator import OperatorProcess

pytestmark = pytest.mark.testbed


def test_created_partitions_are_served_by_their_leader_when_create_partitions_returns(
    kafka: KafkaHandle, log_topics: tuple[str, str]
) -> None:
    # The broker lists new partitions before it hosts them (NOT_LEADER_FOR_PARTITION meanwhile);
    # producers writing in that window lost acknowledged records. So the operator returns from
    # create_partitions only once every partition answers ListOffsets, and the epoch it
    # publishes next never points producers at a partition not yet served.
    epochs, registry = log_topics
    topic = kafka.create_topic(12)
    side = KafkaSide(kafka.config(), OperatorConfig(epoch_topic=epochs, registry_topic=registry))
    try:
        assert side.create_partitions(topic, 48) is None
        probe = AdminClient(kafka.config())
        assert len(probe.list_topics(topic, timeout=10).topics[topic].partitions) == 48
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        futures = probe.list_offsets(
            {TopicPartition(topic, p): latest for p in range(48)}, request_timeout=10
        )
        ends = {tp.partition: future.result(timeout=15).offset for tp, future in futures.items()}
        assert ends == dict.fromkeys(range(48), 0)
        # asking again for a count the topic already has (an operator restarted while it created
        # them) sends no CreatePartitions and waits the same way
        assert side.create_partitions(topic, 48, 12) is None
    finally:
        side.close()


def test_live_producers_are_judged_from_every_report_written_before_the_question(
    kafka: KafkaHandle, log_topics: tuple[str, str]
) -> None:
    # A registry reader that lags would count a producer as gone whose report it has not read
    # yet; a fence would then not wait for that producer, and its records under the old
    # partition count would land after the thresholds (the ordering scenario saw 435 keys out of
    # order). So the operator reads the registry to its end before it judges who is live.
    epochs, registry = log_topics
    side = KafkaSide(kafka.config(), OperatorConfig(epoch_topic=epochs, registry_topic=registry))
    slow = kafka.faults.add(Fault(api="Fetch", topic=registry, delay=3.0))
    try:
        wait_for(lambda: slow.hits >= 1, 10, "the reader's next fetch to be held")
        report = ProducerReport(
            producer_id="p-1", topics=("orders",), session_timeout_ms=30_000,
            reported_at_ms=int(time.time() * 1000),
        )  # fmt: skip
        writer = Producer(kafka.config())
        writer.produce(registry, key=b"p-1", value=report.model_dump_json().encode())
        assert writer.flush(10) == 0
        assert set(side.live_producers("orders")) == {"p-1"}
    finally:
        kafka.faults.remove(slow.id)
        side.close()


@pytest.mark.parametrize("skew_ms", [-600_000, 600_000], ids=["clock-10-min-behind", "clock-10-min-ahead"])
def test_a_producer_with_a_skewed_clock_is_judged_by_when_its_reports_arrive(
    kafka: KafkaHandle, log_topics: tuple[str, str], skew_ms: int
) -> None:
    # Reports stamped by a clock 10 minutes off: behind, the wall-clock judgement counted a
    # reporting producer as gone (a fence would not wait for its acknowledgement); ahead, it
    # counted a dead one as live for 10 minutes. The operator's own receipt time decides.
    epochs, registry = log_topics
    side = KafkaSide(kafka.config(), OperatorConfig(epoch_topic=epochs, registry_topic=registry))
    writer = Producer(kafka.config())
    try:
        report = ProducerReport(
            producer_id="skewed", topics=("orders",), session_timeout_ms=3_000,
            reported_at_ms=int(time.time() * 1000) + skew_ms,
        )  # fmt: skip
        writer.produce(registry, key=b"skewed", value=report.model_dump_json().encode())
        assert writer.flush(10) == 0
        assert set(side.live_producers("orders")) == {"skewed"}, "it just reported: live"
        # no report since: gone once its 3 s session has passed by the operator's clock
        wait_for(lambda: "skewed" not in side.live_producers("orders"), 15, "the silent producer to be gone")
    finally:
        side.close()


def test_the_operator_creates_ordos_control_topics_when_it_starts(
    kafka: KafkaHandle, operator_process: Callable[..., OperatorProcess]
) -> None:
    """Before, they appeared with the first expansion, and an OrderedProducer started before any
    expansion failed with ConfigError (cannot read the epoch log): the order of deployment mattered."""
    epochs, registry = kafka.topic("fresh-epochs"), kafka.topic("fresh-producers")
    assert not {epochs, registry} & set(kafka.admin.list_topics(timeout=10).topics)
    operator_process(ORDO_EPOCH_TOPIC=epochs, ORDO_REGISTRY_TOPIC=registry).start()
    wait_for(
        lambda: {epochs, registry} <= set(kafka.admin.list_topics(timeout=10).topics),
        60,
        "the control topics, created by the operator at its start",
    )
    topic = kafka.create_topic(2)
    with OrderedProducer(kafka.config(), epoch_topic=epochs, registry_topic=registry) as producer:
        producer.produce(topic, b"v", key=b"k")
        assert producer.flush(10) == 0
