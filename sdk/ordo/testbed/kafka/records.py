"""Walk record-batch headers inside a records blob without decoding (or decompressing) records.

kio's ``read_batch`` decodes every record and checks the CRC, which is too slow for the data path
and cannot read compressed batches; the proxy only needs a few fixed-position header fields.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kio.records.readers import read_record
from kio.static.primitive import i64

# Fixed v2 (magic 2) batch header layout; see the Kafka message format documentation.
_BASE_AND_LENGTH = struct.Struct(">qi")
_MAGIC_OFFSET = 16
_ATTRIBUTES = struct.Struct(">h")  # at 21
_LAST_DELTA_AND_TIMESTAMPS = struct.Struct(">iqq")  # at 23
_PRODUCER = struct.Struct(">qh")  # at 43
_CONTROL_KEY = struct.Struct(">hh")
_RECORDS_START = 61
_LOG_OVERHEAD = 12

TRANSACTIONAL = 0x10
CONTROL = 0x20
ABORT_MARKER = 0
COMMIT_MARKER = 1


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    last_offset: int
    attributes: int
    producer_id: int
    producer_epoch: int
    start: int  # byte position of the batch inside the blob
    end: int

    @property
    def transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL)

    @property
    def control(self) -> bool:
        return bool(self.attributes & CONTROL)


def batches(blob: bytes | None) -> Iterator[BatchHeader]:
    """Complete v2 batches in ``blob``; a truncated trailing batch (allowed in Fetch) is skipped."""
    if not blob:
        return
    pos, size = 0, len(blob)
    while pos + _RECORDS_START <= size:
        base, length = _BASE_AND_LENGTH.unpack_from(blob, pos)
        end = pos + _LOG_OVERHEAD + length
        if end > size or blob[pos + _MAGIC_OFFSET] != 2:
            return
        (attributes,) = _ATTRIBUTES.unpack_from(blob, pos + 21)
        last_delta, _, _ = _LAST_DELTA_AND_TIMESTAMPS.unpack_from(blob, pos + 23)
        producer_id, producer_epoch = _PRODUCER.unpack_from(blob, pos + 43)
        yield BatchHeader(base, base + last_delta, attributes, producer_id, producer_epoch, pos, end)
        pos = end


@dataclass(frozen=True, slots=True)
class Hole:
    """Offsets ``start`` to ``end`` (exclusive) missing from an answer, before its batch ``after``."""

    start: int
    end: int
    after: BatchHeader


def hole_at(blob: bytes | None, offset: int, lasting: Callable[[int], bool] = lambda _: False) -> Hole | None:
    """The first hole in ``blob`` read from ``offset``: offsets missing before a complete batch,
    or None when the answer has none. A hole for which ``lasting(start)`` says the offsets will
    never come is passed over.

    Tansu reserves a batch's offsets before it stores the batch, and a Fetch lists what is stored:
    with producers writing one partition at once, an answer can skip a batch stored a moment
    later. A client handed such an answer moves past the missing records for good."""
    expected = offset
    for batch in batches(blob):
        if batch.last_offset < expected:
            continue
        if batch.base_offset > expected and not lasting(expected):
            return Hole(expected, batch.base_offset, batch)
        expected = batch.last_offset + 1
    return None


def control_type(blob: bytes, batch: BatchHeader) -> int:
    """ABORT_MARKER or COMMIT_MARKER for a control batch (its single record's key holds the type)."""
    _, base_timestamp, _ = _LAST_DELTA_AND_TIMESTAMPS.unpack_from(blob, batch.start + 23)
    record, _ = read_record(
        memoryview(blob)[: batch.end], base_timestamp, i64(batch.base_offset), batch.start + _RECORDS_START
    )
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        return -1
    _, marker = _CONTROL_KEY.unpack_from(record.key, 0)
    return int(marker)
