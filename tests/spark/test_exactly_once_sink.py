"""The exactly-once Kafka sink across a crash between Kafka's commit and Spark's commit log.

The first run writes batch 2 to Kafka and then dies before Spark records the batch as done; more
records arrive; the restarted query (Trigger.AvailableNow) replays batch 2 from the checkpoint and
goes on. The output topic, read committed, holds every input record exactly once."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ordo_spark.apps import source_options
from ordo_spark.sink import ExactlyOnceKafkaSink
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import consume
from ordo_testbed.waiting import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.testbed, pytest.mark.slow]

PER_BATCH = 10_000


class CrashAfterWriting:
    """The sink, then a failure of the driver once ``batch`` is written (as if it died there)."""

    def __init__(self, sink: ExactlyOnceKafkaSink, batch: int) -> None:
        self.sink, self.batch = sink, batch

    def __call__(self, frame: Any, batch_id: int) -> None:
        self.sink(frame, batch_id)
        if batch_id == self.batch:
            raise RuntimeError(f"crash after writing batch {batch_id}")


def _produce(kafka: KafkaHandle, topic: str, numbers: range) -> None:
    producer = Producer(kafka.config(linger_ms=5))
    for n in numbers:
        producer.produce(topic, str(n).encode(), key=f"k{n % 97}".encode())
        if n % 5000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def _committed_values(kafka: KafkaHandle, topic: str, partitions: int) -> list[int]:
    consumer = Consumer(
        kafka.config(group_id="verify", isolation_level="read_committed", enable_partition_eof=True)
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    try:
        messages = consume(consumer, until_eof=partitions, timeout=30)  # the output topic must end
    finally:
        consumer.close()
    return [int(m.value() or b"-1") for m in messages]


def _settled_values(kafka: KafkaHandle, topic: str, expected: int) -> list[int]:
    """The committed values once at least ``expected`` are visible: a transaction's commit markers
    reach the partitions after commit_transaction returns, so read_committed lags a moment."""
    seen: list[int] = []

    def enough() -> bool:
        seen[:] = _committed_values(kafka, topic, 2)
        return len(seen) >= expected

    wait_for(enough, 30, f"{expected} committed records in {topic}", step=0.2)
    return seen


def _start(spark: Any, kafka: KafkaHandle, topic: str, epochs: str, checkpoint: Path, sink: Any) -> Any:
    options = source_options(
        {"bootstrap.servers": kafka.bootstrap},
        subscribe=topic,
        startingOffsets="earliest",
        maxRecordsPerTrigger=str(PER_BATCH),
        epochTopic=epochs,
    )
    stream = spark.readStream.format("ordo-kafka").options(**options).load()
    return stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))


def test_a_replayed_batch_is_not_written_twice(
    spark: Any, kafka: KafkaHandle, log_topics: tuple[str, str], tmp_path: Path
) -> None:
    epochs, _ = log_topics
    source, output = kafka.create_topic(3), kafka.create_topic(2)
    sink = ExactlyOnceKafkaSink(
        output, {"bootstrap.servers": kafka.bootstrap}, f"test-{uuid.uuid4().hex[:8]}"
    )
    checkpoint = tmp_path / "checkpoint"
    _produce(kafka, source, range(3 * PER_BATCH))

    first = _start(spark, kafka, source, epochs, checkpoint, CrashAfterWriting(sink, batch=2)).start()
    with pytest.raises(Exception, match="crash after writing batch 2"):
        first.awaitTermination(180)
    assert len(_settled_values(kafka, output, 3 * PER_BATCH)) == 3 * PER_BATCH, "batch 2 was written"

    _produce(kafka, source, range(3 * PER_BATCH, 5 * PER_BATCH))  # the stream goes on meanwhile
    second = _start(spark, kafka, source, epochs, checkpoint, sink).trigger(availableNow=True).start()
    assert second.awaitTermination(180)
    assert second.exception() is None
    assert second.recentProgress[0]["batchId"] == 2, "the restart replays the batch that crashed"

    values = _settled_values(kafka, output, 5 * PER_BATCH)
    assert len(values) == len(set(values)) == 5 * PER_BATCH, "no duplicates, nothing lost"
    assert set(values) == set(range(5 * PER_BATCH))
