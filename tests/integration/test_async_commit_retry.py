"""AsyncConsumer: what a failed asynchronous commit carried is sent again even when the consumer
has nothing more to do. A gated member's commit past a threshold is what another member's gate
waits for (issue 35, item 6): an idle member that never sent it again would hold that gate."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition

from ordo.async_consumer import AsyncConsumer
from ordo_testbed.kafka.faults import Fault
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed


@pytest.fixture
def failing_commit(kafka: KafkaHandle) -> Iterator[Fault]:
    """The next OffsetCommit is answered with a (non-retriable) error for each partition."""
    kafka.require_faults()
    fault = kafka.faults.add(Fault(api="OffsetCommit", error="offset_metadata_too_large", count=1))
    yield fault
    kafka.faults.remove(fault.id)


def test_an_idle_consumer_sends_a_failed_commit_again(kafka: KafkaHandle, failing_commit: Fault) -> None:
    topic = kafka.create_topic(1)
    group = kafka.topic("g")
    config = kafka.config(group_id=group, auto_offset_reset="earliest", session_timeout_ms=6000)
    producer = Producer(kafka.config())
    for i in range(10):
        producer.produce(topic, f"r{i}".encode(), partition=0)
    assert producer.flush(10) == 0
    reader = Consumer(kafka.config(group_id=group))
    with AsyncConsumer(config, [topic], ordering="unordered", commit_interval=0.5) as consumer:
        handed: list[Message] = []

        def all_handed_out() -> bool:
            handed.extend(consumer.poll(0.05).records)
            return len(handed) == 10

        wait_for(all_handed_out, 30, "every record handed out")
        consumer.done_many(handed)  # at once: the first commit carries them all
        wait_for(lambda: failing_commit.hits == 1, 10, "the first commit, failed")

        def committed() -> bool:
            consumer.poll(0.05)  # nothing more to hand out: the consumer is idle
            return reader.committed([TopicPartition(topic, 0)], timeout=5)[0].offset == 10

        wait_for(committed, 20, "the failed commit sent again")
    reader.close()
