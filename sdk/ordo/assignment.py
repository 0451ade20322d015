"""Assignment of a producer group's source partitions to its members (KIP-509), pure.

Every strategy is balanced (sizes differ by at most one), deterministic for the same input
whatever order members are given in, and gives members beyond the partition count nothing
(standby). ``sticky`` also moves the fewest partitions from the current assignment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

__all__ = ["Assignment", "Strategy", "assign", "moved_partitions", "standby_members"]

Assignment = dict[str, list[int]]
"""member → sorted source partitions; every member is present, standby members with []."""


class Strategy(StrEnum):
    STICKY = "sticky"
    RANGE = "range"
    ROUND_ROBIN = "roundRobin"


def assign(
    partitions: int,
    members: Iterable[str],
    current: Mapping[str, Iterable[int]] | None = None,
    strategy: Strategy | str = Strategy.STICKY,
) -> Assignment:
    """Assign source partitions ``0..partitions-1`` to ``members``.

    ``current`` (member → partitions) is only read by ``sticky``; partitions out of range, held by
    members that are gone, or held twice are treated as unowned.
    """
    if partitions < 0:
        raise ValueError(f"source partition count must not be negative, got {partitions}")
    names = sorted(set(members))
    try:
        chosen = Strategy(strategy)
    except ValueError:
        raise ValueError(
            f"unknown assignment strategy {strategy!r}: choose one of {', '.join(s.value for s in Strategy)}"
        ) from None
    if not names:
        return {}
    if chosen == Strategy.RANGE:
        return _range(partitions, names)
    if chosen == Strategy.ROUND_ROBIN:
        return {m: list(range(i, partitions, len(names))) for i, m in enumerate(names)}
    return _sticky(partitions, names, current or {})


def _range(partitions: int, names: list[str]) -> Assignment:
    size, extra = divmod(partitions, len(names))
    result: Assignment = {}
    start = 0
    for i, member in enumerate(names):
        end = start + size + (1 if i < extra else 0)
        result[member] = list(range(start, end))
        start = end
    return result


def _sticky(partitions: int, names: list[str], current: Mapping[str, Iterable[int]]) -> Assignment:
    # What each member may keep: valid partitions, each claimed once (lowest member name wins).
    held: dict[str, list[int]] = {m: [] for m in names}
    claimed: set[int] = set()
    for member in names:
        for p in sorted(set(current.get(member, ()))):
            if 0 <= p < partitions and p not in claimed:
                held[member].append(p)
                claimed.add(p)

    # Quotas: the `extra` larger quotas go to the members holding most, which maximises what is
    # kept (a member gains from the larger quota only if it already holds more than `size`).
    size, extra = divmod(partitions, len(names))
    by_holding = sorted(names, key=lambda m: (-len(held[m]), m))
    quota = {m: size + (1 if rank < extra else 0) for rank, m in enumerate(by_holding)}

    result: Assignment = {}
    free: list[int] = sorted(set(range(partitions)) - claimed)
    for member in names:
        keep = held[member][: quota[member]]
        free.extend(held[member][quota[member] :])
        result[member] = keep
    free.sort()
    for member in names:
        need = quota[member] - len(result[member])
        if need > 0:
            result[member] = sorted(result[member] + free[:need])
            del free[:need]
    return result


def moved_partitions(before: Mapping[str, Iterable[int]], after: Mapping[str, Iterable[int]]) -> set[int]:
    """Partitions whose owner differs between two assignments (new and removed ones included)."""
    owner_before = {p: m for m, ps in before.items() for p in ps}
    owner_after = {p: m for m, ps in after.items() for p in ps}
    return {p for p in owner_before.keys() | owner_after.keys() if owner_before.get(p) != owner_after.get(p)}


def standby_members(assignment: Mapping[str, Iterable[int]]) -> list[str]:
    """Members with nothing to do (KIP-509's case of more instances than source partitions)."""
    return sorted(m for m, ps in assignment.items() if not list(ps))
