"""OrderedProducer with partitioner="round_robin" (KIP-369) against the testbed broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer

from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo.ordered_producer import OrderedProducer
from ordo_testbed.kafka import Fault
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import consume, records_per_partition
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed
PARTITIONS = 7


@pytest.fixture
def producer(kafka: KafkaHandle) -> Iterator[tuple[OrderedProducer, str, EpochLogWriter]]:
    epochs, registry = kafka.topic("epochs"), kafka.topic("producers")
    ensure_log_topics(kafka.admin, epochs, registry)
    topic = kafka.create_topic(PARTITIONS)
    writer = EpochLogWriter(kafka.config(), epochs)
    writer.write(EpochHistory.initial(topic, PARTITIONS))
    made = OrderedProducer(
        kafka.config(linger_ms=5),
        partitioner="round_robin",
        epoch_topic=epochs,
        registry_topic=registry,
        session_timeout=3.0,
        availability_interval=0.2,
    )
    yield made, topic, writer
    made.close()
    writer.close()


def _written(kafka: KafkaHandle, topic: str, partitions: int) -> dict[int, int]:
    """Committed records per partition (end offsets count the transactions' markers too)."""
    return records_per_partition(kafka.bootstrap, topic, partitions, timeout=60)


def test_100k_keyed_records_spread_evenly_and_keep_their_keys(
    kafka: KafkaHandle, producer: tuple[OrderedProducer, str, EpochLogWriter]
) -> None:
    p, topic, _ = producer
    for i in range(100_000):
        p.produce(topic, b"v", key=b"same-key" if i % 2 else f"k{i % 97}".encode())
    assert p.flush(60) == 0
    counts = _written(kafka, topic, PARTITIONS)
    assert sum(counts.values()) == 100_000
    assert max(counts.values()) - min(counts.values()) <= 1, counts
    reader = Consumer(kafka.config(group_id=kafka.topic("g"), auto_offset_reset="earliest"))
    reader.subscribe([topic])
    try:
        assert all(m.key() for m in consume(reader, 20))  # placement ignored the key; it is kept
    finally:
        reader.close()


def test_an_unavailable_partitions_share_goes_evenly_to_the_others(
    kafka: KafkaHandle, producer: tuple[OrderedProducer, str, EpochLogWriter]
) -> None:
    p, topic, _ = producer
    p.produce(topic, b"first", key=b"k")  # registers the topic: its leaders are watched from now on
    kafka.faults.add(Fault(api="Metadata", topic=topic, partition=3, error="leader_not_available"))
    wait_for(lambda: p.unavailable_partitions(topic) == {3}, 10, "the producer to see partition 3 leaderless")
    for _ in range(60_000):
        p.produce(topic, b"v", key=b"k")
    kafka.faults.clear()
    wait_for(lambda: not p.unavailable_partitions(topic), 10, "partition 3 back")
    assert p.flush(60) == 0
    counts = _written(kafka, topic, PARTITIONS)
    counts[0] -= 1  # the first record
    assert counts[3] == 0
    others = [n for q, n in counts.items() if q != 3]
    assert max(others) - min(others) <= 1 and sum(others) == 60_000, counts


def test_new_partitions_are_used_from_the_next_record_after_the_epoch_flip(
    kafka: KafkaHandle, producer: tuple[OrderedProducer, str, EpochLogWriter]
) -> None:
    p, topic, writer = producer
    for _ in range(PARTITIONS * 10):
        p.produce(topic, b"old", key=b"k")
    history = EpochHistory.initial(topic, PARTITIONS).begin_fence(9)
    writer.write(history)
    kafka.grow(topic, 9)
    writer.write(history.publish(dict.fromkeys(range(PARTITIONS), 10)))
    wait_for(lambda: p.partitions_for(topic) == 9, 10, "the producer to see epoch 1")
    for _ in range(9 * 5):
        p.produce(topic, b"new", key=b"k")
    assert p.flush(30) == 0
    counts = _written(kafka, topic, 9)
    assert [counts[q] for q in range(PARTITIONS)] == [15] * PARTITIONS and counts[7] == counts[8] == 5
