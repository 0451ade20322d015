"""Per-partition commit positions: the highest offset below which every record is processed.

Pure bookkeeping, no Kafka. Records are added in fetch order (increasing offsets per partition,
possibly with gaps: transaction markers, compaction) and marked done in any order; the commit
position is the offset of the first record not yet done, or one past the last record when all are
done. Records fetched but not handed out yet count as not done, so the position never passes them.
"""

from __future__ import annotations

import operator
from collections import deque
from collections.abc import Sequence

__all__ = ["OffsetTracker"]


class OffsetTracker:
    """One partition. ``add`` in offset order; ``done`` in any order; ``position`` to commit."""

    __slots__ = ("_done", "_last", "_next", "_pending")

    def __init__(self) -> None:
        self._pending: deque[int] = deque()  # offsets added and not yet passed, in order
        self._done: set[int] = set()  # done, but behind an earlier offset that is not
        self._last = -1  # the last offset added
        self._next: int | None = None  # the position

    def add(self, offset: int) -> None:
        """A record was fetched. Offsets must increase; a repeat or a step back is a bug upstream."""
        if offset <= self._last:
            raise ValueError(f"offset {offset} added after {self._last}: offsets must increase per partition")
        self._last = offset
        if not self._pending:
            self._next = offset
        self._pending.append(offset)

    def add_many(self, offsets: Sequence[int]) -> None:
        """``add`` for a run of offsets (one fetched run of the partition), checked in one pass."""
        if not offsets:
            return
        if offsets[0] <= self._last or not all(map(operator.lt, offsets, offsets[1:])):
            raise ValueError(
                f"offsets {offsets[0]}..{offsets[-1]} added after {self._last}: offsets must increase"
            )
        self._last = offsets[-1]
        if not self._pending:
            self._next = offsets[0]
        self._pending.extend(offsets)

    def done_many(self, offsets: Sequence[int]) -> bool:
        """``done`` for several offsets; True when the position moved. Cheaper than a call each:
        the offsets join the done set in one step and the head is passed once."""
        pending = self._pending
        if not pending or not offsets:
            return False
        first, last = pending[0], pending[-1]
        if min(offsets) < first or max(offsets) > last:  # unknown: ignored, as by ``done``
            offsets = [o for o in offsets if first <= o <= last]
        done = self._done
        done.update(offsets)
        if pending[0] not in done:
            return False
        while pending and pending[0] in done:
            passed = pending.popleft()
            done.discard(passed)
        self._next = pending[0] if pending else passed + 1
        return True

    def done(self, offset: int) -> bool:
        """Mark ``offset`` processed; True when the position moved. Unknown offsets are ignored."""
        pending = self._pending
        if not pending or not pending[0] <= offset <= pending[-1]:
            return False
        if offset != pending[0]:
            self._done.add(offset)
            return False
        last = pending.popleft()
        done = self._done
        while pending and pending[0] in done:
            last = pending.popleft()
            done.discard(last)
        self._next = pending[0] if pending else last + 1
        return True

    def advance_to(self, offset: int) -> bool:
        """With every record added done, pass the offsets below ``offset`` that hold no record
        (transaction markers, aborted records: the consumer's fetch position went past them);
        True when the position moved. A threshold is an end offset, often just past a commit
        marker: a gate waiting for it would otherwise never open."""
        if self._pending or (self._next is not None and offset <= self._next):
            return False
        self._next = offset
        self._last = max(self._last, offset - 1)
        return True

    def highest_done(self) -> int:
        """The highest offset marked done (-1 when none)."""
        if self._done:
            return max(self._done)
        if self._pending:
            return self._pending[0] - 1  # below the head everything is done (or was never added)
        return self._next - 1 if self._next is not None else -1

    def truncate_after(self, offset: int) -> int:
        """Forget records added above ``offset`` (never handed out: another consumer will read
        them); returns how many. The position stays at the first record not done."""
        pending, dropped = self._pending, 0
        while pending and pending[-1] > offset:
            self._done.discard(pending.pop())
            dropped += 1
        return dropped

    @property
    def position(self) -> int | None:
        """The offset to commit (the next record to process), or None before any record."""
        return self._next

    @property
    def unfinished(self) -> int:
        """Records added and not done."""
        return len(self._pending) - len(self._done)
