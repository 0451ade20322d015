"""GatedConsumer as a drop-in confluent_kafka.Consumer: the Consumer's methods, each with the
gate's meaning where it has one. The topic: 2 -> 4, partition 2's records gated on partition 0."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Message, TopicPartition

from ordo import GatedConsumer, OffsetStoreError
from ordo_testbed.gate_topics import grown_with_a_gated_partition
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed
OLD = 200


@pytest.fixture
def grown(kafka: KafkaHandle) -> tuple[str, str]:
    return grown_with_a_gated_partition(kafka, OLD)


def _consumer(
    kafka: KafkaHandle, epochs: str, partitions: list[int], topic: str, **config: object
) -> GatedConsumer:
    return GatedConsumer(
        kafka.config(group_id=kafka.topic("g"), auto_offset_reset="earliest", **config),
        [topic],
        epoch_topic=epochs,
        assignment=[TopicPartition(topic, p, 0) for p in partitions],
    )


@pytest.fixture
def held(kafka: KafkaHandle, grown: tuple[str, str]) -> Iterator[GatedConsumer]:
    """A consumer of partition 2 alone: its gate holds (partition 0 is nobody's yet)."""
    topic, epochs = grown
    with _consumer(kafka, epochs, [2], topic) as consumer:
        wait_for(
            lambda: not consumer.consume(100, 0.1) and (topic, 2) in consumer.closed_gates(), 30, "the gate"
        )
        yield consumer


def _take(consumer: GatedConsumer, count: int) -> list[Message]:
    out: list[Message] = []

    def enough() -> bool:
        out.extend(m for m in consumer.consume(100, 0.1) if m.error() is None)
        return len(out) >= count

    wait_for(enough, 30, f"{count} records")
    return out


def test_position_is_the_next_record_handed_out_not_librdkafkas_fetch_position(held: GatedConsumer) -> None:
    topic = held.topics[0]
    (where,) = held.position([TopicPartition(topic, 2)])
    assert where.offset == 0, "the held record at 0 comes next, whatever was fetched after it"
    assert held.raw.position([TopicPartition(topic, 2)])[0].offset > 0, "librdkafka fetched past it"


def test_storing_or_committing_past_a_held_record_is_refused_and_stores_nothing(held: GatedConsumer) -> None:
    topic = held.topics[0]
    with pytest.raises(
        OffsetStoreError, match=rf"{topic}\[2\] offset 5 is past what was handed out .*held behind a gate"
    ):
        held.store_offsets(offsets=[TopicPartition(topic, 2, 5)])
    with pytest.raises(OffsetStoreError, match="past what was handed out"):
        held.commit(offsets=[TopicPartition(topic, 2, 5)])
    assert held.committed([TopicPartition(topic, 2)], timeout=10)[0].offset < 0, "nothing committed"


def test_a_paused_partition_stays_paused_when_its_gate_opens_until_resumed(
    kafka: KafkaHandle, grown: tuple[str, str]
) -> None:
    topic, epochs = grown
    with _consumer(kafka, epochs, [0, 2], topic) as consumer:
        consumer.pause([TopicPartition(topic, 2)])
        old = _take(consumer, OLD)
        assert {m.partition() for m in old} == {0}
        consumer.commit()  # partition 0 done: the gate of 2 would open now
        assert not [m for m in consumer.consume(100, 1.0) if m.error() is None], "paused by the application"
        consumer.resume([TopicPartition(topic, 2)])
        new = _take(consumer, 10)
        assert [m.value() for m in new] == [f"new-{i}".encode() for i in range(10)]


def test_with_auto_offset_store_off_only_what_the_application_stores_opens_gates(
    kafka: KafkaHandle, grown: tuple[str, str]
) -> None:
    """Handed out is not processed: the new partition waits until partition 0's records are stored
    (its threshold), then opens; a stored message commits with commit(message=...)."""
    topic, epochs = grown
    with _consumer(kafka, epochs, [0, 2], topic, enable_auto_offset_store=False) as consumer:
        old = _take(consumer, OLD)
        wait_for(lambda: not consumer.consume(100, 0.1) and (topic, 2) in consumer.closed_gates(), 30, "held")
        consumer.store_offsets(message=old[-2])  # one record short of the threshold
        assert not consumer.consume(100, 0.5) and (topic, 2) in consumer.closed_gates()
        consumer.commit(message=old[-1])
        new = _take(consumer, 10)
        assert {m.partition() for m in new} == {2}
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
        assert committed == OLD


def test_seek_back_reads_again_through_the_gate_and_metadata_passes_through(
    kafka: KafkaHandle, grown: tuple[str, str]
) -> None:
    topic, epochs = grown
    with _consumer(kafka, epochs, [0, 2], topic) as consumer:
        first = _take(consumer, OLD + 10)
        assert [m.partition() for m in first][-10:] == [2] * 10, "the new records after the old ones"
        consumer.seek(TopicPartition(topic, 0, OLD - 5))  # behind its threshold
        again = _take(consumer, 5)
        assert [m.offset() for m in again] == list(range(OLD - 5, OLD))
        assert {(tp.topic, tp.partition) for tp in consumer.assignment()} == {(topic, 0), (topic, 2)}
        assert consumer.consumer_group_metadata() is not None
