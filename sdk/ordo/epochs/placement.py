"""Misplaced records (docs/architecture.md, "Misplaced records"), the pure rule.

Once an expansion's epoch e is active, a key's records of e go to murmur2(key) mod e's count. A
keyed record in one of e's old partitions p, at or past p's threshold (so of epoch e), whose key
e's count puts elsewhere but an earlier epoch's count puts in p, was placed by that older count
after the fence: a producer that missed the expansion (paused, cut off, or one that does not read
the epoch log). Its key's other records of epoch e are in another partition, so no reader can
put it in its key's order; gated readers do not deliver it as if in order (their policy:
``on_misplaced``, the Spark source's ``misplacedRecords``).

Never misplaced: records of epoch 0, records in the partitions an epoch created (until a later
epoch's threshold in them), keyless records, records of topics ordo never expanded, and keys no
count of the history puts where they are (placed by something other than murmur2: explicit or
round-robin producers, whose records have no key order for ordo to keep).

``misplacement`` is the rule as stated; ``checks`` and ``judge`` are the same rule in the shape
the readers' hot path takes (``ordo._batch_scan``, ``_fastscan.c``): per partition, the offset
ranges where it can apply, newest first. Tests hold the two equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..partitioners import murmur2, to_positive
from .history import Epoch, epoch_of

__all__ = ["NO_END", "Check", "Misplacement", "checks", "judge", "misplacement", "topic_checks"]

NO_END = (1 << 63) - 1
"""The end of a partition's last checked range (an int64, as the C scan reads it)."""


@dataclass(frozen=True, slots=True)
class Misplacement:
    """A record placed by an old partition count after its partition's threshold."""

    partition: int
    offset: int
    epoch: int
    """The epoch the record belongs to by its offset."""
    partitions: int
    """That epoch's partition count."""
    belongs: int
    """The key's partition in that epoch: where its other records of the epoch are."""
    placed_by: int
    """The earlier partition count that puts the key where the record is (the newest such)."""

    def describe(self, topic: str) -> str:
        return (
            f"{topic}[{self.partition}]@{self.offset}: a keyed record of epoch {self.epoch} placed by "
            f"{self.placed_by} partitions, past the partition's threshold; its key belongs in partition "
            f"{self.belongs} of the epoch's {self.partitions}"
        )


def misplacement(
    active: Sequence[Epoch], partition: int, offset: int, key: bytes | None
) -> Misplacement | None:
    """The rule as stated: whether the record at (``partition``, ``offset``) with ``key`` is
    misplaced, given a topic's active epochs (oldest first), and how."""
    if key is None:
        return None
    entry = epoch_of(active, partition, offset)
    if entry is None or entry.from_partitions is None or partition >= entry.from_partitions:
        return None  # no epoch yet, epoch 0, or a partition this epoch created
    h = to_positive(murmur2(key))
    belongs = h % entry.partitions
    if belongs == partition:
        return None
    earlier = [e.partitions for e in active if e.epoch < entry.epoch]
    for count in reversed(earlier):
        if h % count == partition:
            return Misplacement(partition, offset, entry.epoch, entry.partitions, belongs, count)
    return None


class Check(NamedTuple):
    """Where in one partition keyed records are checked: ``start`` <= offset < ``end`` are of
    ``epoch``, whose count is ``partitions``; ``earlier`` are the counts of every active epoch
    before it, newest first. A tuple: the C scan reads its first four fields by position."""

    start: int
    end: int
    partitions: int
    earlier: tuple[int, ...]
    epoch: int


def topic_checks(active: Sequence[Epoch]) -> dict[int, tuple[Check, ...]]:
    """``checks`` of every partition that has any, in one pass over the history: a partition's
    ranges start at its thresholds (a partition an epoch created has none before the next
    epoch's threshold in it), so there are as many as the history holds thresholds."""
    ranges: dict[int, list[Check]] = {}
    for index in range(1, len(active)):
        entry = active[index]
        earlier = tuple(e.partitions for e in reversed(active[:index]))
        for p, start in entry.thresholds.items():
            found = ranges.setdefault(p, [])
            if found:  # the previous epoch's range in p ends where this one starts
                found[-1] = found[-1]._replace(end=start)
            found.append(Check(start, NO_END, entry.partitions, earlier, entry.epoch))
    return {p: tuple(reversed([c for c in found if c.start < c.end])) for p, found in ranges.items() if found}


def checks(active: Sequence[Epoch], partition: int) -> tuple[Check, ...]:
    """The ranges of ``partition`` where a record may be misplaced, newest first (records are
    read mostly in the newest): one per active epoch of which it is an old partition."""
    return topic_checks(active).get(partition, ())


def judge(ranges: Sequence[Check], partition: int, offset: int, key: bytes | None) -> Misplacement | None:
    """``misplacement`` given the partition's ``checks`` (the C scan does the same per record)."""
    if key is None:
        return None
    for check in ranges:
        if check.start <= offset < check.end:
            h = to_positive(murmur2(key))
            belongs = h % check.partitions
            if belongs == partition:
                return None
            for count in check.earlier:
                if h % count == partition:
                    return Misplacement(partition, offset, check.epoch, check.partitions, belongs, count)
            return None
    return None
