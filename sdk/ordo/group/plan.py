"""A member's reaction to an assignment, pure: what to hand back, what to take, what to
acknowledge (``GroupProducer`` applies it: waits, closes and opens producers, reads checkpoints).

Like the operator's ``plan_group``, it takes what was read (the assignment, the partitions the
member holds, its settings) and returns what to do; no lock, no Kafka, no clock.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ..member_wire import GroupSettings, MemberAssignment

__all__ = ["AssignmentPlan", "plan_assignment"]


@dataclass(frozen=True)
class AssignmentPlan:
    """What the member does with one assignment (or with its absence: everything is revoked)."""

    generation: int
    """The generation the events carry."""
    settings: GroupSettings
    """The group's settings from now on."""
    target: frozenset[int]
    """The source partitions the member is to own once applied."""
    release: tuple[int, ...]
    """Held partitions to hand back: no new unit, the open one may end, then their producers close."""
    restart: bool
    """The settings changed what producers serve them (exactly-once, checkpoint topic): everything
    held is handed back, announced at once, and taken again under the new settings."""
    acknowledge: int | None
    """The generation to acknowledge once applied (None: nothing was assigned to acknowledge)."""

    def to_take(self, held: Collection[int]) -> list[int]:
        """The partitions to take, given those held once the release is done (a partition dropped
        meanwhile, fenced, is taken again if it is still the member's)."""
        return sorted(p for p in self.target if p not in held)


def plan_assignment(
    assignment: MemberAssignment | None,
    held: Collection[int],
    settings: GroupSettings | None,
    default: GroupSettings,
    generation: int,
    stepped_out: bool = False,
) -> AssignmentPlan:
    """The member's next move: ``held`` are the partitions it holds now, ``settings`` those it
    took last (None before its first assignment; ``default`` then), ``generation`` the last one it
    applied, ``stepped_out`` whether it gave its Lease up for idleness (it takes nothing then,
    until ``alive()`` brings it back)."""
    new = (assignment.settings if assignment is not None else None) or settings or default
    # exactlyOnce or checkpointTopic changed (the CRD refuses that; an older CRD may not): the
    # member's producers cannot serve the new settings, so it hands its partitions back to
    # itself, as in a revocation, and takes them again under the new settings
    restart = settings is not None and not new.same_producers(settings)
    target = frozenset() if assignment is None or stepped_out else frozenset(assignment.partitions)
    return AssignmentPlan(
        generation=assignment.generation if assignment is not None else generation,
        settings=new,
        target=target,
        release=tuple(sorted(p for p in held if p not in target or restart)),
        restart=restart,
        acknowledge=assignment.generation if assignment is not None else None,
    )
