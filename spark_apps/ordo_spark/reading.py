"""Executor side: read one slice (a whole offset range of one partition) into Arrow batches.

Consumers are made lazily in the Python worker and kept for the next task of the same query
(Spark reuses Python workers), since connecting costs more than a small batch's reading.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .planning import DataLossError, Slice

__all__ = ["SCHEMA", "close_consumers", "read_slice", "schema_for"]

_log = logging.getLogger(__name__)

SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
        ),
        StructField("epoch", IntegerType()),
    ]
)
_ROWS_PER_BATCH = 20_000


def schema_for(include_headers: bool) -> StructType:
    """The source's columns; ``headers`` only with the option includeHeaders (ordo's default true)."""
    if include_headers:
        return SCHEMA
    return StructType([f for f in SCHEMA.fields if f.name != "headers"])


_consumers: dict[tuple[tuple[str, str], ...], Consumer] = {}


def _consumer(config: Mapping[str, Any]) -> Consumer:
    key = tuple(sorted((k, str(v)) for k, v in config.items()))
    found = _consumers.get(key)
    if found is None:
        found = _consumers[key] = Consumer(dict(config))
    return found


def close_consumers() -> None:
    """Close this process's cached consumers (Spark's workers end with the session instead)."""
    while _consumers:
        _consumers.popitem()[1].close()


def read_slice(
    config: Mapping[str, Any],
    piece: Slice,
    schema: pa.Schema,
    *,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
) -> Iterator[pa.RecordBatch]:
    """The records of ``piece`` in offset order, as batches of ``schema``."""
    consumer = _consumer(config)
    tp = TopicPartition(piece.topic, piece.partition, piece.start)
    consumer.assign([tp])
    columns = _Columns(piece, with_headers="headers" in schema.names)
    try:
        deadline = time.monotonic() + poll_timeout_ms / 1000
        next_check = time.monotonic() + 1.0
        position = piece.start
        while position < piece.end:
            # Ask for no more than the range holds: consume() returns early only when it has them
            # all (transaction markers make it short; the partition-end event then ends the wait).
            messages = consumer.consume(min(piece.end - position, 10_000), 0.1)
            if messages:
                deadline = time.monotonic() + poll_timeout_ms / 1000
            elif time.monotonic() > next_check:  # nothing comes: are the records still there?
                next_check = time.monotonic() + 1.0
                position = _skip_lost(consumer, piece, position, fail_on_data_loss, always=False)
            for message in messages:
                error = message.error()
                if error is not None:
                    position = _on_error(consumer, piece, position, error, message, fail_on_data_loss)
                    continue
                offset = message.offset()
                assert offset is not None
                if offset >= piece.end:
                    position = piece.end
                    break
                columns.add(message, offset)
                position = offset + 1
                if len(columns) >= _ROWS_PER_BATCH:
                    yield columns.batch(schema)
            if position < piece.end and time.monotonic() > deadline:
                raise TimeoutError(
                    f"ordo-kafka: {piece.topic}-{piece.partition}: no records past offset {position} "
                    f"within {poll_timeout_ms} ms, but the batch ends at {piece.end} (option pollTimeoutMs)"
                )
        if len(columns):
            yield columns.batch(schema)
    finally:
        consumer.unassign()  # stop prefetching for a partition this worker may not read next


def _on_error(
    consumer: Consumer, piece: Slice, position: int, error: KafkaError, message: Message, fail: bool
) -> int:
    """The new position after an error event: the end of the partition reached (records past
    it were transaction markers or aborted), or offsets out of range (data loss)."""
    if error.code() == KafkaError._PARTITION_EOF:
        reached = message.offset()
        return max(position, reached if reached is not None else position)
    if error.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
        return _skip_lost(consumer, piece, position, fail, always=True)
    if error.fatal():
        raise RuntimeError(f"ordo-kafka: {piece.topic}-{piece.partition}: {error}")
    _log.warning("ordo-kafka: %s-%s: %s", piece.topic, piece.partition, error)
    return position


def _skip_lost(consumer: Consumer, piece: Slice, position: int, fail: bool, *, always: bool) -> int:
    """Where to go on when records of the slice are gone (deleted by retention, or the partition
    was recreated or truncated after planning): fail clearly, or skip them with a warning. With
    ``always`` false, the position is kept when the partition still holds the rest of the range."""
    low, high = consumer.get_watermark_offsets(
        TopicPartition(piece.topic, piece.partition), timeout=30, cached=False
    )
    if low > position:
        resume = min(low, piece.end)
    elif high < piece.end and position >= high:
        resume = piece.end
    elif always:
        resume = min(max(low, position), piece.end)
    else:
        return position
    problem = (
        f"ordo-kafka: {piece.topic}-{piece.partition}: offsets {position}..{resume - 1} of the batch "
        f"({piece.start}..{piece.end - 1}) are gone (the partition holds {low}..{high - 1})"
    )
    if fail:
        raise DataLossError(
            f"{problem}. Some data may have been lost; set the source option failOnDataLoss to "
            "false to go on."
        )
    _log.warning("%s; skipping them (failOnDataLoss=false)", problem)
    if resume < piece.end:
        consumer.assign([TopicPartition(piece.topic, piece.partition, resume)])
    return resume


class _Columns:
    """Column lists for one Arrow batch; the epoch is looked up per epoch segment, not per record."""

    def __init__(self, piece: Slice, *, with_headers: bool) -> None:
        self.piece = piece
        self.with_headers = with_headers
        self._clear()

    def _clear(self) -> None:
        self.offsets: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.timestamps: list[int | None] = []
        self.types: list[int] = []
        self.headers: list[Any] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, message: Message, offset: int) -> None:
        self.offsets.append(offset)
        self.keys.append(message.key())
        self.values.append(message.value())
        kind, millis = message.timestamp()
        self.types.append(kind)
        self.timestamps.append(millis * 1000 if millis >= 0 else None)
        if self.with_headers:
            self.headers.append(_headers(message.headers()))

    def batch(self, schema: pa.Schema) -> pa.RecordBatch:
        piece, n = self.piece, len(self.offsets)
        if len(piece.epochs) > 1:
            epochs = [piece.epoch_at(o) for o in self.offsets]
        else:
            epochs = [piece.epoch_at(0)] * n
        columns = {
            "topic": [piece.topic] * n,
            "partition": [piece.partition] * n,
            "offset": self.offsets,
            "key": self.keys,
            "value": self.values,
            "timestamp": self.timestamps,
            "timestampType": self.types,
            "headers": self.headers,
            "epoch": epochs,
        }
        arrays = [pa.array(columns[f.name], f.type) for f in schema]
        self._clear()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _headers(raw: Mapping[str, str | bytes | None] | list[tuple[str, str | bytes | None]] | None) -> Any:
    if not raw:
        return None
    pairs = raw.items() if isinstance(raw, Mapping) else raw
    return [{"key": k, "value": v.encode() if isinstance(v, str) else v} for k, v in pairs]
