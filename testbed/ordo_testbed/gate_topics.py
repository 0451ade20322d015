"""Topics in the shapes the ordering gate's tests need (GatedConsumer's and AsyncConsumer's)."""

from __future__ import annotations

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from ordo.epochs import EpochHistory, stamp
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.waiting import wait_for

__all__ = ["grown_past_transaction_markers", "grown_with_a_gated_partition"]


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
