"""The gate's progress checks, the pure part (docs/architecture.md, "The gate"): which partitions a
consumer's held gates wait for, what to ask the broker about them, and which gates open given
the answer.

A consumer holding gates asks, off its poll thread (``ordo.epochs.watcher``), the group's
committed offsets of every partition a held gate waits for (one OffsetFetch for all of them) and,
only for those whose committed offset falls short, the log start (what retention deleted before
the group consumed it is done too). Its poll thread evaluates the held gates against the latest
answer with the consumer's own progress (``verdicts``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from ..topic_partition import TP
from .gate import Gate, GateKeeper

__all__ = [
    "TopicProgress",
    "asked",
    "group_progress",
    "learned",
    "needs_log_start",
    "verdicts",
]


def asked(gates: Iterable[tuple[str, Gate]]) -> dict[TP, int]:
    """Every partition the ``gates`` (topic, gate) wait for, with the highest threshold asked of
    it: the broker is asked about these and no others."""
    wanted: dict[TP, int] = {}
    for topic, gate in gates:
        for partition, threshold in gate.waiting_for.items():
            key = (topic, partition)
            if threshold > wanted.get(key, -1):
                wanted[key] = threshold
    return wanted


def needs_log_start(wanted: Mapping[TP, int], committed: Mapping[TP, int]) -> list[TP]:
    """The wanted partitions whose committed offset (missing: none) is below what is asked of
    them: only there can the log start still open a gate."""
    return [tp for tp, threshold in wanted.items() if committed.get(tp, -1) < threshold]


def group_progress(committed: Mapping[TP, int], log_starts: Mapping[TP, int]) -> dict[TP, int]:
    """Per partition, the offset below which the group is done: its committed offset or the log
    start, whichever is further (a negative committed offset is none). Partitions at 0 are left
    out: no progress is progress 0."""
    progress = {tp: offset for tp, offset in committed.items() if offset > 0}
    for tp, start in log_starts.items():
        if start > progress.get(tp, 0):
            progress[tp] = start
    return progress


def learned(known: Mapping[TP, int], answer: Mapping[TP, int]) -> dict[TP, int] | None:
    """What is known of the group's progress after a round's ``answer`` (per partition the
    further of the two), or None when the answer moved nothing: no gate can have opened. A round
    asks only about what the held gates still wait for, so what earlier rounds learned stays: a
    gate waiting for two partitions that reach their thresholds one after the other must find
    the first one still met when the second is (with only the last answer kept, each round
    answered for one and forgot the other, and the gate never opened)."""
    if not any(offset > known.get(tp, 0) for tp, offset in answer.items()):
        return None
    progress = dict(known)
    for tp, offset in answer.items():
        if offset > progress.get(tp, 0):
            progress[tp] = offset
    return progress


class TopicProgress(Mapping[int, int]):
    """One topic's progress per partition, for ``GateKeeper.gate``: this consumer's own (what it
    processed, whether or not it still owns the partition) or the group's, whichever is further.
    A view, looked up per partition: a gate needs a few partitions of thousands."""

    __slots__ = ("_group", "_own", "_topic")

    def __init__(self, topic: str, own: Mapping[TP, int], group: Mapping[TP, int]) -> None:
        self._topic, self._own, self._group = topic, own, group

    def get(self, partition: int, default: int = 0) -> int:  # type: ignore[override]
        key = (self._topic, partition)
        own, group = self._own.get(key, default), self._group.get(key, default)
        return own if own > group else group

    def __getitem__(self, partition: int) -> int:
        key = (self._topic, partition)
        if key not in self._own and key not in self._group:
            raise KeyError(partition)
        return self.get(partition)

    def __iter__(self) -> Iterator[int]:
        return iter({p for t, p in (*self._own, *self._group) if t == self._topic})

    def __len__(self) -> int:
        return sum(1 for _ in self)


def verdicts(keeper: GateKeeper, held: Mapping[int, int], progress: Mapping[int, int]) -> dict[int, Gate]:
    """The gate of each held record (partition -> its offset) given ``progress``: one pass over
    each class's requirements for all of them (``GateKeeper.gate``'s memo), not one per gate."""
    unmet: dict[tuple[int, int], dict[int, int]] = {}
    return {partition: keeper.gate(partition, offset, progress, unmet) for partition, offset in held.items()}
