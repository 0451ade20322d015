"""Executor side: read a task's slices (each a whole offset range of one partition) into Arrow
batches. A record placed by an old partition count after its partition's threshold (misplaced,
``ordo.epochs.placement``; looked for only in the slice's checked ranges) fails the task, or with
misplacedRecords=deliver is read as it is; either way it is said and counted.

Consumers are made lazily in the Python worker and kept for the next task of the same query
(Spark reuses Python workers), since connecting costs more than a small batch's reading.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
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

from ordo import metrics
from ordo.epochs.placement import Misplacement, judge
from ordo.errors import MisplacedRecordError

from .options import MisplacedRecords
from .planning import DataLossError, Slice

__all__ = ["SCHEMA", "close_consumers", "read_slice", "read_slices", "schema_for"]

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
    misplaced: MisplacedRecords = "fail",
) -> Iterator[pa.RecordBatch]:
    """The records of ``piece`` in offset order, as batches of ``schema``."""
    return read_slices(
        config,
        [piece],
        schema,
        fail_on_data_loss=fail_on_data_loss,
        poll_timeout_ms=poll_timeout_ms,
        misplaced=misplaced,
    )


class _Progress:
    """How far one slice of a task has been read."""

    def __init__(self, piece: Slice, with_headers: bool) -> None:
        self.piece, self.position = piece, piece.start
        self.columns = _Columns(piece, with_headers=with_headers)

    @property
    def done(self) -> bool:
        return self.position >= self.piece.end


def read_slices(
    config: Mapping[str, Any],
    pieces: Sequence[Slice],
    schema: pa.Schema,
    *,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
    misplaced: MisplacedRecords = "fail",
) -> Iterator[pa.RecordBatch]:
    """The records of every piece as batches of ``schema``; each batch holds one piece's records,
    and each piece's come in offset order. The pieces are fetched side by side (one fetch serves
    them all): read one after another, each waited a fetch of its own."""
    consumer = _consumer(config)
    with_headers = "headers" in schema.names
    reads = {(p.topic, p.partition): _Progress(p, with_headers) for p in pieces if p.start < p.end}
    consumer.assign([TopicPartition(t, p, r.position) for (t, p), r in reads.items()])
    try:
        deadline = time.monotonic() + poll_timeout_ms / 1000
        next_check = time.monotonic() + 1.0
        while pending := [r for r in reads.values() if not r.done]:
            # Ask for no more than the ranges hold: consume() returns early only when it has them
            # all (transaction markers make it short; the partition-end events then end the wait).
            left = sum(r.piece.end - r.position for r in pending)
            messages = consumer.consume(min(left, 10_000), 0.1)
            if messages:
                deadline = time.monotonic() + poll_timeout_ms / 1000
            elif time.monotonic() > next_check:  # nothing comes: are the records still there?
                next_check = time.monotonic() + 1.0
                for read in pending:
                    read.position = _skip_lost(
                        consumer, read.piece, read.position, fail_on_data_loss, always=False
                    )
            for message in messages:
                found = reads.get((message.topic(), message.partition()))  # type: ignore[arg-type]
                if found is None or found.done:
                    continue  # fetched past its range before the partition was let go
                error = message.error()
                if error is not None:
                    found.position = _on_error(
                        consumer, found.piece, found.position, error, message, fail_on_data_loss
                    )
                else:
                    offset = message.offset()
                    assert offset is not None
                    if offset >= found.piece.end:
                        found.position = found.piece.end
                    else:
                        checks = found.piece.checks  # where a record may be misplaced: one call each
                        if checks and (wrong := judge(checks, found.piece.partition, offset, message.key())):
                            _misplaced(found.piece, message, wrong, misplaced)
                        found.columns.add(message, offset)
                        found.position = offset + 1
                        if len(found.columns) >= _ROWS_PER_BATCH:
                            yield found.columns.batch(schema)
            for read in pending:
                if read.done:
                    if len(read.columns):
                        yield read.columns.batch(schema)
                    # stop prefetching a partition whose range is read
                    consumer.incremental_unassign([TopicPartition(read.piece.topic, read.piece.partition)])
            late = next((r for r in reads.values() if not r.done), None)
            if late is not None and time.monotonic() > deadline:
                piece = late.piece
                raise TimeoutError(
                    f"ordo-kafka: {piece.topic}-{piece.partition}: no records past offset {late.position} "
                    f"within {poll_timeout_ms} ms, but the batch ends at {piece.end} (option pollTimeoutMs)"
                )
    finally:
        consumer.unassign()  # stop prefetching for partitions this worker may not read next


def _misplaced(piece: Slice, message: Message, found: Misplacement, policy: MisplacedRecords) -> None:
    """Fail at a misplaced record (misplacedRecords=fail), or let it be read; said and counted."""
    metrics.misplaced_records(piece.topic, 1)
    what = f"ordo-kafka: {found.describe(piece.topic)}"
    if policy == "deliver":
        _log.warning("%s: read as it is (misplacedRecords=deliver)", what)
        return
    _log.warning("%s: the task fails (misplacedRecords=fail)", what)
    raise MisplacedRecordError(
        f"{what}. A producer wrote it by an old partition count after the expansion's thresholds, so "
        "its key's order cannot be kept. Set the source option misplacedRecords to deliver to read "
        "such records as they are (topics whose keyed records are not placed by murmur2: round-robin "
        "or explicit producers).",
        [message],
    )


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
    if resume < piece.end:  # only this partition moves: the task's others read on
        consumer.incremental_unassign([TopicPartition(piece.topic, piece.partition)])
        consumer.incremental_assign([TopicPartition(piece.topic, piece.partition, resume)])
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
