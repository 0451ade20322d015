"""Which fetched records may be handed out now, per ordering mode. Pure, no Kafka.

Records wait in *lanes*. A lane is the unit of order: a partition (``partition`` mode), a key within
a partition (``key`` mode; records without a key share one lane per partition), or nothing at all
(``unordered``: one lane per partition only for fairness). In the ordered modes a lane holds back
its next record until the previous one handed out is released, so at most one record per lane is
ever being processed, and lanes are served round-robin so no partition or key starves another.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from typing import Final, Generic, Literal, TypeVar

__all__ = ["ORDERINGS", "Ordering", "Scheduler"]

Ordering = Literal["partition", "key", "unordered"]
ORDERINGS: Final[tuple[Ordering, ...]] = ("partition", "key", "unordered")

R = TypeVar("R")
P = TypeVar("P", bound=Hashable)


class _Lane(Generic[R]):
    __slots__ = ("busy", "id", "items", "queued")

    def __init__(self, lane_id: tuple[Hashable, Hashable]) -> None:
        self.id = lane_id
        self.items: deque[R] = deque()
        self.busy = False  # a record of this lane is being processed (ordered modes)
        self.queued = False  # in the ready queue


class Scheduler(Generic[P, R]):
    """Buffered records by lane. ``add`` in fetch order, ``take`` what may run, ``release`` when a
    taken record is done, ``drop`` a partition's buffered records (it is being revoked)."""

    def __init__(self, ordering: Ordering) -> None:
        if ordering not in ORDERINGS:
            raise ValueError(f"unknown ordering {ordering!r}: choose one of {', '.join(ORDERINGS)}")
        self.ordering: Ordering = ordering
        self._ordered = ordering != "unordered"
        self._by_key = ordering == "key"
        self._lanes: dict[tuple[Hashable, Hashable], _Lane[R]] = {}
        self._of_partition: dict[P, set[tuple[Hashable, Hashable]]] = {}
        self._ready: deque[_Lane[R]] = deque()
        self._buffered: dict[P, int] = {}
        self.total = 0
        """Records buffered (added and neither taken nor dropped)."""

    def add(self, partition: P, key: bytes | None, item: R) -> None:
        lane_id = (partition, key if self._by_key else None)
        lane = self._lanes.get(lane_id)
        if lane is None:
            lane = self._lanes[lane_id] = _Lane(lane_id)
            self._of_partition.setdefault(partition, set()).add(lane_id)
        lane.items.append(item)
        self._buffered[partition] = self._buffered.get(partition, 0) + 1
        self.total += 1
        if not lane.busy and not lane.queued:
            lane.queued = True
            self._ready.append(lane)

    def add_many(self, partition: P, items: list[R]) -> None:
        """``add`` for a run of one partition's records, in the modes without keys (one lane per
        partition): one step for the run."""
        if self._by_key:
            raise ValueError("add_many is for the modes without keys: add each record with its key")
        if not items:
            return
        lane_id = (partition, None)
        lane = self._lanes.get(lane_id)
        if lane is None:
            lane = self._lanes[lane_id] = _Lane(lane_id)
            self._of_partition.setdefault(partition, set()).add(lane_id)
        lane.items.extend(items)
        self._buffered[partition] = self._buffered.get(partition, 0) + len(items)
        self.total += len(items)
        if not lane.busy and not lane.queued:
            lane.queued = True
            self._ready.append(lane)

    def take(self, limit: int) -> list[tuple[P, R]]:
        """Up to ``limit`` records that may be processed now, as (partition, record)."""
        return [(partition, item) for partition, run in self.take_runs(limit) for item in run]

    def take_runs(self, limit: int) -> list[tuple[P, list[R]]]:
        """``take`` as runs of one partition's records, in their order: (partition, records)."""
        out: list[tuple[P, list[R]]] = []
        ready = self._ready
        buffered = self._buffered
        count = 0
        while ready and count < limit:
            lane = ready.popleft()
            lane.queued = False
            partition: P = lane.id[0]  # type: ignore[assignment]
            items = lane.items
            if not items:  # dropped meanwhile
                continue
            if self._ordered:
                run = [items.popleft()]
                lane.busy = True
            else:
                # a fair share per turn: cheaper than one record per turn, still interleaves partitions
                taken = min(len(items), limit - count, max(1, limit // (len(ready) + 1)))
                if taken == len(items):
                    run = list(items)
                    items.clear()
                else:
                    popleft = items.popleft
                    run = [popleft() for _ in range(taken)]
                if items:
                    lane.queued = True
                    ready.append(lane)
            out.append((partition, run))
            count += len(run)
            buffered[partition] -= len(run)
            self.total -= len(run)
        return out

    def release(self, partition: P, key: bytes | None) -> bool:
        """A taken record of this lane is done: the lane's next record may run (True when the
        lane has one)."""
        if not self._ordered:
            return False
        lane_id = (partition, key if self._by_key else None)
        lane = self._lanes.get(lane_id)
        if lane is None:
            return False  # its partition was dropped
        lane.busy = False
        if lane.items:
            if not lane.queued:
                lane.queued = True
                self._ready.append(lane)
            return True
        if not lane.queued:
            del self._lanes[lane_id]  # idle lanes are forgotten: key spaces can be large
            lanes = self._of_partition.get(partition)
            if lanes is not None:
                lanes.discard(lane_id)
        return False

    def drop(self, partition: P, keep: Callable[[R], bool] | None = None) -> int:
        """Forget a partition's buffered records (those ``keep`` accepts stay, in their lanes);
        returns how many were dropped. Without ``keep`` the partition's lanes are forgotten."""
        dropped = 0
        lanes = self._of_partition.get(partition, set())
        for lane_id in list(lanes):
            lane = self._lanes[lane_id]
            before = len(lane.items)
            if keep is not None:
                lane.items = deque(item for item in lane.items if keep(item))
            else:
                lane.items.clear()  # a queued lane is skipped when reached
            dropped += before - len(lane.items)
            if keep is None or (not lane.items and not lane.busy):
                del self._lanes[lane_id]
                lanes.discard(lane_id)
        if keep is None:
            self._of_partition.pop(partition, None)
        left = self._buffered.get(partition, 0) - dropped
        if left:
            self._buffered[partition] = left
        else:
            self._buffered.pop(partition, None)
        self.total -= dropped
        return dropped

    def buffered(self, partition: P) -> int:
        return self._buffered.get(partition, 0)
