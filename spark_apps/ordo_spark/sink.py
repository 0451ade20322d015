"""An exactly-once Kafka sink for ``foreachBatch``: a replayed batch is not written twice.

Each Spark task writes its part of a batch in one Kafka transaction, and in the same transaction
commits a marker, the batch id + 1, as the offset of a consumer group of its own
(``ordo-sink.<sink id>.<task partition>``, on partition 0 of the output topic: the offset is only a
number there, never read as a position). Kafka makes the records and the marker visible together
or not at all. A replayed batch (after a crash between the writes and Spark's commit log, or a task
retry) reads the marker first and skips a part that is already written. The transactional id is
the same per sink and task partition, so initialising it fences a zombie attempt of the same task.

This needs the batch's split into Spark partitions to be the same when it is replayed: true for
the ``ordo-kafka`` source read without a shuffle (its tasks follow from the batch's offsets, kept
in the checkpoint, and the option maxTasks: keep that option as it is across a restart) and after
a hash repartition by a column.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

__all__ = ["ExactlyOnceKafkaSink", "marker_group", "write_part"]


def marker_group(sink_id: str, part: int) -> str:
    return f"ordo-sink.{sink_id}.{part}"


class ExactlyOnceKafkaSink:
    """``query.writeStream.foreachBatch(ExactlyOnceKafkaSink(...))``; rows need ``key`` and
    ``value`` (binary or string) columns. ``sink_id`` must stay the same across restarts of the
    query and differ between queries writing the same topic."""

    def __init__(self, topic: str, kafka: Mapping[str, str], sink_id: str) -> None:
        if not sink_id or any(c.isspace() for c in sink_id):
            raise ValueError(f"ExactlyOnceKafkaSink: sink_id must be a non-empty word, got {sink_id!r}")
        self.topic, self.kafka, self.sink_id = topic, dict(kafka), sink_id

    def __call__(self, frame: Any, batch_id: int) -> None:
        write = functools.partial(_write_task, self.topic, self.kafka, self.sink_id, batch_id)
        frame.select("key", "value").foreachPartition(write)


def _write_task(topic: str, kafka: dict[str, str], sink_id: str, batch_id: int, rows: Iterator[Any]) -> None:
    from pyspark import TaskContext

    context = TaskContext.get()
    assert context is not None, "runs inside a Spark task"
    write_part(topic, kafka, sink_id, context.partitionId(), batch_id, ((r["key"], r["value"]) for r in rows))


def write_part(
    topic: str,
    kafka: Mapping[str, str],
    sink_id: str,
    part: int,
    batch_id: int,
    rows: Iterable[tuple[bytes | str | None, bytes | str | None]],
) -> int | None:
    """Write one part of a batch exactly once; the number of records written, or None when this
    part of this batch was already written."""
    name = marker_group(sink_id, part)
    producer = Producer({**kafka, "transactional.id": name, "linger.ms": 20, "batch.num.messages": 10000})
    consumer: Consumer | None = None
    try:
        producer.init_transactions(60)  # fences an earlier attempt and settles its transaction
        consumer = Consumer(
            {**kafka, "group.id": name, "enable.auto.commit": False, "isolation.level": "read_committed"}
        )
        marker = TopicPartition(topic, 0)
        written_up_to = consumer.committed([marker], timeout=60)[0].offset
        if written_up_to > batch_id:  # the marker is the last written batch id + 1
            return None
        producer.begin_transaction()
        count = 0
        for key, value in rows:
            while True:
                try:
                    producer.produce(topic, value=value, key=key)
                    break
                except BufferError:
                    producer.poll(0.1)  # the local queue is full: let deliveries drain
            count += 1
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, batch_id + 1)], consumer.consumer_group_metadata(), 60
        )
        producer.commit_transaction(120)
        return count
    except KafkaException:
        with contextlib.suppress(KafkaException):  # fenced or never begun: nothing can become visible
            producer.abort_transaction(30)
        raise
    finally:
        if consumer is not None:
            consumer.close()
        producer.flush(0)
