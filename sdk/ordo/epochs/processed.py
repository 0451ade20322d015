"""The consumers' processed offsets, one rule for GatedConsumer and AsyncConsumer (pure): how a
partition's processed offset advances, and what the fetch passed without a record.

A threshold is an end offset, and a transactional producer's last record is followed by its
commit marker: unless the offsets a consumer's fetch passed without a record (transaction markers,
aborted records) count as processed, two partitions gated on each other after a 2 -> 3 expansion
wait for each other forever (the chaos soak's stalled consumers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..topic_partition import TP

__all__ = ["MARKER_CHECK_INTERVAL", "advances", "passed"]

MARKER_CHECK_INTERVAL = 0.1
"""Seconds between a consumer's looks for offsets its fetch passed without a record: each look
asks librdkafka for the positions."""


def advances(
    processed: Mapping[TP, int], offsets: Iterable[tuple[TP, int | None]]
) -> list[tuple[TP, int, int]]:
    """(partition, from, to) for each offset past its partition's processed one (-1 where none),
    in order; a partition named twice advances from its earlier offset. None (no offset yet) and
    offsets not past are left out. ``processed`` is not changed: the caller applies the result."""
    now: dict[TP, int] = {}
    moved = []
    for tp, offset in offsets:
        before = now.get(tp, processed.get(tp, -1))
        if offset is not None and offset > before:
            now[tp] = offset
            moved.append((tp, before, offset))
    return moved


def passed(positions: Iterable[tuple[TP, int]], waiting: Mapping[TP, int]) -> dict[TP, int]:
    """Per partition, the offset below which everything was processed or passed without a record:
    the consumer's fetch position, or the first record not yet processed (``waiting``: held at a
    gate, fetched and not handed out, handed out and not done) when that is lower. A partition
    without a position (negative: librdkafka has none) is left out."""
    return {tp: min(at, waiting.get(tp, at)) for tp, at in positions if at >= 0}
