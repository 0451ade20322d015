"""The operator's Kafka side against the real broker: what it promises before an epoch is published."""

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from ordo.testbed.kafka.fixtures import KafkaHandle
from ordo_operator.config import OperatorConfig
from ordo_operator.kafka import KafkaSide

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
        # asking again for a count the topic already has is fine, and waits the same way
        assert side.create_partitions(topic, 48) is not None
    finally:
        side.close()
