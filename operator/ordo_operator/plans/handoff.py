"""Cooperative two-step handoff of source partitions (docs/architecture.md), pure.

Ownership lives in the members' pod annotations, so the operator keeps no state of its own and a
restarted operator picks up where it was. A partition moving from A to B is first removed from
A's annotation (listed under ``revoking``); B receives it only once A's Lease acknowledges that
generation, or A is no longer live. A member that is not live loses its partitions at once:
in exactly-once mode the next owner's transactional producer fences it out of Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ordo.assignment import Strategy, assign
from ordo.member_wire import MemberAssignment

__all__ = ["HandoffPlan", "Member", "ShrinkBlocked", "is_live", "plan_handoff"]


class ShrinkBlocked(ValueError):
    """sourcePartitions shrank below partitions that members still own."""


@dataclass(frozen=True)
class Member:
    """What the operator knows of one selected pod."""

    name: str
    live: bool
    assignment: MemberAssignment | None = None
    acked: int | None = None

    @property
    def owned(self) -> tuple[int, ...]:
        return self.assignment.partitions if self.assignment else ()

    @property
    def revoking(self) -> tuple[int, ...]:
        """Partitions it was asked to give up and has not yet acknowledged giving up."""
        a = self.assignment
        if a is None or not a.revoking or (self.acked is not None and self.acked >= a.generation):
            return ()
        return a.revoking

    @property
    def settled(self) -> bool:
        return self.assignment is None or (
            self.acked is not None and self.acked >= self.assignment.generation
        )


def is_live(ready: bool, deleting: bool, renewed: datetime | None, now: datetime, session: timedelta) -> bool:
    """A member is live while its pod is Ready, not being deleted, and its Lease is fresh."""
    return ready and not deleting and renewed is not None and now - renewed <= session


@dataclass(frozen=True)
class HandoffPlan:
    generation: int
    writes: dict[str, MemberAssignment]
    """Annotations to write now (pod → new value)."""
    target: dict[str, list[int]]
    """Where every partition is headed once handoffs complete (live members only)."""
    waiting: dict[int, str] = field(default_factory=dict)
    """Partitions held back until this member acknowledges giving them up."""
    unassigned: list[int] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.writes)


def plan_handoff(
    group: str,
    partitions: int,
    members: Iterable[Member],
    generation: int,
    strategy: Strategy | str = Strategy.STICKY,
) -> HandoffPlan:
    """The next step towards a balanced assignment of ``partitions`` over the live members.

    ``generation`` is the latest generation written so far; the plan's writes use the next one.
    Raises ShrinkBlocked when live members own partitions at or beyond ``partitions``.
    """
    everyone = {m.name: m for m in members}
    live = {name: m for name, m in everyone.items() if m.live}
    beyond = sorted(p for m in live.values() for p in (*m.owned, *m.revoking) if p >= partitions)
    if beyond:
        raise ShrinkBlocked(
            f"sourcePartitions {partitions} would drop partitions {beyond} that members still own; "
            "stop those members or wait until they release them"
        )

    target = assign(partitions, live, {n: m.owned for n, m in live.items()}, strategy)
    held: dict[int, str] = {p: n for n, m in live.items() for p in m.revoking}
    owner: dict[int, str] = {p: n for n, m in live.items() for p in m.owned}

    new: dict[str, tuple[list[int], list[int]]] = {}  # name → (partitions, revoking)
    for name, m in live.items():
        keep = [p for p in m.owned if p in target[name]]
        give_up = [p for p in m.owned if p not in target[name]]
        still_revoking = [p for p in m.revoking if p not in give_up]
        new[name] = (keep, sorted(give_up + still_revoking))
    waiting: dict[int, str] = {}
    for name, wanted in target.items():
        for p in wanted:
            if owner.get(p) == name:
                continue
            blocker = owner.get(p) or held.get(p)
            if blocker is not None and blocker != name:
                waiting[p] = blocker  # revoke first; grant after the acknowledgement
            else:
                new[name][0].append(p)

    next_generation = generation + 1
    writes: dict[str, MemberAssignment] = {}
    for name, (keep, revoking) in new.items():
        m = live[name]
        now_revoking = tuple(sorted(set(revoking) - set(keep)))  # given back before it was acknowledged
        value = (tuple(sorted(keep)), now_revoking)
        before = (m.owned, m.revoking)
        if value != before or m.assignment is None:
            writes[name] = MemberAssignment(
                group=group, generation=next_generation, partitions=value[0], revoking=value[1]
            )
    for name, m in everyone.items():  # pods that are not live give up everything at once
        if not m.live and m.assignment is not None and (m.owned or m.assignment.revoking):
            writes[name] = MemberAssignment(group=group, generation=next_generation)

    assigned = {p for name, (keep, _) in new.items() for p in keep}
    unassigned = sorted(set(range(partitions)) - assigned)
    return HandoffPlan(
        generation=next_generation if writes else generation,
        writes=writes,
        target=target,
        waiting=waiting,
        unassigned=unassigned,
    )
