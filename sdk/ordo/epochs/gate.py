"""The consumer-side gate (docs/architecture.md): may a record be processed yet?

A record of epoch e in partition q may be processed once every earlier place a key of q could
have been written is consumed up to where that epoch began. The design names prior_e(q); the
requirement is in fact transitive: a key's records of epoch e-2 sit in a partition p' of
prior_{e-1}(p), and if p holds no record of epoch e-1 nothing has checked p' yet. So the gate
collects, through every earlier active epoch, each place's threshold. Gates only point to
earlier epochs, so they cannot deadlock, and progress only grows, so an open gate stays open.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from math import gcd

from .history import EpochHistory, epoch_of

__all__ = ["Gate", "GateKeeper"]


@dataclass(frozen=True)
class Gate:
    """The verdict for one record."""

    partition: int
    offset: int
    epoch: int | None
    waiting_for: Mapping[int, int] = field(default_factory=dict)
    """Partitions whose progress is below the threshold they must reach (partition → threshold)."""

    @property
    def open(self) -> bool:
        return self.epoch is not None and not self.waiting_for

    @property
    def unknown_epoch(self) -> bool:
        """The partition is newer than every active epoch: wait until the epoch is published."""
        return self.epoch is None


class GateKeeper:
    """Evaluates gates for one epoch history; build a new one when the history changes."""

    def __init__(self, history: EpochHistory) -> None:
        self.history = history
        self._active = history.active_epochs
        self._index = {e.epoch: i for i, e in enumerate(self._active)}
        self._cache: dict[tuple[int, int], dict[int, int]] = {}
        self._thresholds: dict[int, tuple[int, ...]] = {}

    def requirements(self, partition: int, epoch: int) -> Mapping[int, int]:
        """Progress needed (partition → offset) before a record of ``epoch`` in ``partition``."""
        return self._requirements(partition, self._index[epoch])

    def unmet(self, partition: int, epoch: int, progress: Mapping[int, int]) -> dict[int, int]:
        """The requirements of a record of ``epoch`` in ``partition`` that ``progress`` (per
        partition, the offset up to which every record is processed) leaves unmet."""
        return _unmet(self.requirements(partition, epoch), progress)

    def _requirements(self, q: int, j: int) -> dict[int, int]:
        """Where a key of partition ``q`` in epoch ``j`` may have been, with thresholds: in epoch
        j's old partitions p ≡ q (mod g), g = gcd(old, new) (its prior set and q itself), and
        transitively where those were. That set depends on q only through q mod g, so it is
        computed once per residue class, not per partition; and of the class's partitions only
        one per residue class of the epoch before is followed. Per partition and epoch, with
        small gcds (1000 -> 1003: every old partition gates every new one) the work grew with
        partitions² and epochs; per class it is one pass over the class and its results."""
        if j == 0:
            return {}
        entry = self._active[j]
        assert entry.from_partitions is not None
        step = gcd(entry.from_partitions, entry.partitions)
        key = self._class(q, j)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        needed: dict[int, int] = {}
        thresholds = entry.thresholds
        earlier = self._active[j - 1]
        earlier_step = gcd(earlier.from_partitions, earlier.partitions) if earlier.from_partitions else 0
        followed: set[int] = set()
        for p in range(q % step, entry.from_partitions, step):
            _raise(needed, p, thresholds[p])
            if earlier_step and p % earlier_step not in followed:
                followed.add(p % earlier_step)
                for earlier_p, offset in self._requirements(p, j - 1).items():
                    _raise(needed, earlier_p, offset)
        self._cache[key] = needed
        return needed

    def _class(self, q: int, j: int) -> tuple[int, int]:
        """Partitions of one class share epoch ``j``'s requirements: q mod gcd(old, new)."""
        entry = self._active[j]
        return (q % gcd(entry.from_partitions, entry.partitions), j) if entry.from_partitions else (0, j)

    def thresholds(self, partition: int) -> tuple[int, ...]:
        """The offsets of ``partition`` that gates wait for (its threshold in each active epoch
        that followed it), ascending: a consumer passing one opens gates of other partitions."""
        cached = self._thresholds.get(partition)
        if cached is None:
            cached = self._thresholds[partition] = tuple(
                sorted(
                    e.thresholds[partition]
                    for e in self._active[1:]
                    if partition in e.thresholds and e.thresholds[partition] > 0
                )
            )
        return cached

    def crossed(self, partition: int, before: int, after: int) -> bool:
        """Whether progress of ``partition`` from ``before`` to ``after`` reaches one of its
        thresholds, so that a gate waiting for it may open now."""
        return any(before < threshold <= after for threshold in self.thresholds(partition))

    def gate(
        self,
        partition: int,
        offset: int,
        progress: Mapping[int, int],
        unmet: dict[tuple[int, int], dict[int, int]] | None = None,
    ) -> Gate:
        """Whether the record at (partition, offset) may be processed, given ``progress``: per
        partition, the offset up to which every record has been processed (a committed offset).

        ``unmet``: a memo, owned by the caller, of the requirements ``progress`` leaves unmet per
        class and epoch, for deciding many gates against the same unchanged ``progress`` (a
        Spark micro-batch's plan): each class's requirements are then scanned once, not once per
        partition (2,048 partitions after 100 expansions: partitions x requirements, ~1 s)."""
        entry = epoch_of(self._active, partition, offset)
        if entry is None:
            return Gate(partition, offset, None)
        j = self._index[entry.epoch]
        key = self._class(partition, j)
        waiting = unmet.get(key) if unmet is not None else None
        if waiting is None:
            requirements = self._requirements(partition, j)
            waiting = _unmet(requirements, progress)
            if unmet is not None:
                unmet[key] = waiting
        # the record's own partition is read in order: everything before `offset` is done
        if waiting.get(partition, offset + 1) <= offset:
            waiting = {p: t for p, t in waiting.items() if p != partition}
        return Gate(partition, offset, entry.epoch, waiting)


def _unmet(requirements: Mapping[int, int], progress: Mapping[int, int]) -> dict[int, int]:
    return {p: t for p, t in requirements.items() if progress.get(p, 0) < t}


def _raise(needed: dict[int, int], partition: int, offset: int) -> None:
    if offset > needed.get(partition, -1):
        needed[partition] = offset
