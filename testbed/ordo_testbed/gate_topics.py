"""Topics in the shapes the ordering gate's tests need (GatedConsumer's and AsyncConsumer's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from ordo.epochs import EpochHistory, stamp
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo.partitioners import murmur2_partition
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.waiting import wait_for

__all__ = [
    "Misplaced",
    "grown_past_transaction_markers",
    "grown_with_a_gated_partition",
    "grown_with_misplaced_records",
    "offsets_in_order",
]


def grown_past_transaction_markers(kafka: KafkaHandle, epochs: str) -> str:
    """A topic grown 2 -> 3 (its history in the epoch log ``epochs``) whose partitions 0 and 1 each
    hold 3 records of epoch 0 ("old-<partition>-<i>") and then 1 of epoch 1 ("new-<partition>",
    stamped), all written by a transactional producer: each threshold (an end offset) lies just
    past a commit marker, one offset beyond the last record, and in 2 -> 3 partition 0's epoch-1
    record waits for partition 1's threshold and partition 1's for partition 0's. A consumer that
    does not count the markers it passed as processed waits for ever."""
    topic = kafka.create_topic(2)
    producer = Producer(kafka.config(transactional_id=kafka.topic("tx")))
    producer.init_transactions(30)
    for i in range(3):
        producer.begin_transaction()
        for partition in (0, 1):
            producer.produce(topic, f"old-{partition}-{i}".encode(), partition=partition)
        producer.commit_transaction(30)
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]

    def ends() -> dict[int, int]:
        found = kafka.admin.list_offsets({TopicPartition(topic, p): latest for p in (0, 1)})
        return {tp.partition: future.result(10).offset for tp, future in found.items()}

    # commit_transaction returns before Kafka has written the last markers (the coordinator
    # writes them after answering EndTxn): 3 records and 3 commit markers each, soon
    wait_for(lambda: ends() == {0: 6, 1: 6}, 10, "the last commit markers in the log")
    thresholds = ends()
    writer = EpochLogWriter(kafka.config(), epochs)
    history = EpochHistory.initial(topic, 2).begin_fence(3)
    writer.write(history)
    kafka.grow(topic, 3)
    writer.write(history.publish(thresholds))
    writer.close()
    producer.begin_transaction()
    for partition in (0, 1):
        producer.produce(topic, f"new-{partition}".encode(), partition=partition, headers=list(stamp(1)))
    producer.commit_transaction(30)
    return topic


def grown_with_a_gated_partition(kafka: KafkaHandle, old_records: int) -> tuple[str, str]:
    """A topic grown 2 -> 4 with an epoch log of its own: partition 0 holds ``old_records`` records
    of epoch 0 ("old-<i>"), partition 2 (new, gated on 0 up to ``old_records``) 10 of epoch 1
    ("new-<i>"). Returns (topic, epoch log topic)."""
    epochs = kafka.topic("epochs")
    ensure_log_topics(kafka.admin, epochs, kafka.topic("producers"))
    topic = kafka.create_topic(2)
    writer = EpochLogWriter(kafka.config(), epochs)
    producer = Producer(kafka.config(linger_ms=5))
    for i in range(old_records):
        producer.produce(topic, f"old-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    history = EpochHistory.initial(topic, 2).begin_fence(4)
    writer.write(history)
    kafka.grow(topic, 4)
    writer.write(history.publish({0: old_records, 1: 0}))
    producer = Producer(kafka.config(linger_ms=5))  # a new client sees the 4 partitions at once
    for i in range(10):
        producer.produce(topic, f"new-{i}".encode(), partition=2)
    assert producer.flush(30) == 0
    writer.close()
    return topic, epochs


@dataclass(frozen=True)
class Misplaced:
    """A topic grown 2 -> 4 (its epoch log: ``epochs``) whose epoch-1 records include keyed
    records placed by the old count (2) after the thresholds. Records are (partition, offset)."""

    topic: str
    epochs: str
    thresholds: dict[int, int]
    records: frozenset[tuple[int, int]]
    """Every record written (data records: no transaction markers, offsets are dense)."""
    misplaced: frozenset[tuple[int, int]]
    ends: dict[int, int]


def grown_with_misplaced_records(kafka: KafkaHandle, per_epoch: int = 40, every: int = 5) -> Misplaced:
    """``per_epoch`` keyed records of epoch 0, placed by murmur2 with 2 partitions; the topic
    grown to 4 and epoch 1 published with the thresholds at the ends; then ``per_epoch`` keyed
    records placed by murmur2 with 4, and after every ``every``-th of them a stale one: a key the
    two counts place apart, written where 2 partitions put it (in 0 or 1, past the threshold: a
    plain confluent-kafka producer that missed the expansion, partitions chosen explicitly), and
    a keyless record after it in its partition (never misplaced)."""
    epochs = kafka.topic("epochs")
    ensure_log_topics(kafka.admin, epochs, kafka.topic("producers"))
    topic = kafka.create_topic(2)
    placed: list[tuple[int, int]] = []

    def write(producer: Producer, key: bytes | None, partition: int) -> None:
        def delivered(error: KafkaError | None, message: Message) -> None:
            assert error is None, error
            placed.append((message.partition(), message.offset()))  # type: ignore[arg-type]

        producer.produce(topic, b"v", key=key, partition=partition, on_delivery=delivered)
        producer.flush(10)  # one at a time: the partitions' order is the order written here

    producer = Producer(kafka.config(enable_idempotence=True))
    for i in range(per_epoch):
        key = f"old-{i}".encode()
        write(producer, key, murmur2_partition(key, 2))
    thresholds = {p: sum(1 for q, _ in placed if q == p) for p in (0, 1)}
    history = EpochHistory.initial(topic, 2).begin_fence(4)
    writer = EpochLogWriter(kafka.config(), epochs)
    writer.write(history)
    kafka.grow(topic, 4)
    writer.write(history.publish(thresholds))
    writer.close()
    producer = Producer(kafka.config(enable_idempotence=True))  # a new client sees the 4 partitions
    stale = (k for k in (f"stale-{i}".encode() for i in range(10_000)) if murmur2_partition(k, 4) >= 2)
    misplaced: list[tuple[int, int]] = []
    for i in range(per_epoch):
        key = f"new-{i}".encode()
        write(producer, key, murmur2_partition(key, 4))
        if i % every == every - 1 and i < per_epoch - every:
            old = next(stale)
            write(producer, old, murmur2_partition(old, 2))
            misplaced.append(placed[-1])
            write(producer, None, murmur2_partition(old, 2))
    ends = {p: 1 + max((o for q, o in placed if q == p), default=-1) for p in range(4)}
    assert len(placed) == sum(ends.values()), "offsets are dense: no markers, nothing lost"
    return Misplaced(topic, epochs, thresholds, frozenset(placed), frozenset(misplaced), ends)


def offsets_in_order(messages: list[Any]) -> dict[int, list[int]]:
    """Per partition, the offsets of ``messages`` in the order they came."""
    order: dict[int, list[int]] = {}
    for message in messages:
        order.setdefault(message.partition(), []).append(message.offset())
    return order
