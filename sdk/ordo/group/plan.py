"""A member's reactions, pure: to an assignment (what to hand back, what to take, what to
acknowledge) and to a unit whose producer failed (take the partition back, or leave it to the
new owner). ``GroupProducer`` applies them: waits, closes and opens producers, reads checkpoints.

Like the operator's ``plan_group``, they take what was read (the assignment, the partitions the
member holds, its settings, the checkpoints) and return what to do; no lock, no Kafka, no clock.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ..member_wire import GroupSettings, MemberAssignment

__all__ = [
    "RETAKE_FIRST_SECONDS",
    "RETAKE_MAX_SECONDS",
    "AssignmentPlan",
    "RetakePlan",
    "UnitFailure",
    "plan_assignment",
    "plan_retake",
    "retake_delay",
]


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


RETAKE_FIRST_SECONDS = 1.0
"""The wait before a member takes back a partition whose unit failed: long enough that the
failing call has raised to the application before the ``assigned`` event comes."""
RETAKE_MAX_SECONDS = 30.0
"""The longest wait between two attempts of a partition that keeps failing."""


@dataclass(frozen=True)
class UnitFailure:
    """What a member knows when a unit's producer became unusable: fenced (by a newer owner, by
    the coordinator's timeout of its transaction, by the operator fencing a silent unit) or any
    other fatal error; Kafka gives all of them the same code (``_FENCED``)."""

    exactly_once: bool
    """The unit had the partition's own transactional producer (at-least-once: the member's one
    idempotent producer, shared by all its partitions)."""
    assigned: bool
    """The member's assignment still gives it the partition: not handed back, not stepped out,
    its Lease holding, the member open."""
    generation: int
    """The generation the member applied last."""
    checkpoint_generation: int | None
    """The generation of the partition's last checkpoint the member has read (None: none)."""
    failures: int
    """This partition's failures in a row since its last committed unit, this one included."""


@dataclass(frozen=True)
class RetakePlan:
    """Take the partition back after ``delay`` seconds, or leave it (``retake`` False)."""

    retake: bool
    delay: float
    why: str


def retake_delay(failures: int) -> float:
    """The backoff before attempt ``failures``: 1 s, doubling, at most 30 s."""
    return min(RETAKE_MAX_SECONDS, RETAKE_FIRST_SECONDS * 2.0 ** min(max(failures - 1, 0), 16))


def plan_retake(failure: UnitFailure) -> RetakePlan:
    """Whether the member takes a partition back after its unit's producer failed.

    A newer owner shows in the member's assignment (it no longer names the partition) or in the
    checkpoints (one of a newer generation than the member's: the new owner committed): the
    partition stays with it. Anything else (the coordinator timed the transaction out, the
    operator fenced the unit while it was silent, an unexpected fatal error) leaves the
    partition the member's, and it re-opens it: a new producer for the same transactional id
    (``init_transactions`` aborts what the failed one left open), the checkpoints read to their
    end, and the unit re-done from the last checkpoint. Exactly-once holds either way: every
    write of the failed producer is refused or aborted. The wait grows with each failure in a
    row, so a partition that keeps failing does not loop hot."""
    if not failure.exactly_once:
        return RetakePlan(
            False, 0.0, "at-least-once: the member's shared producer failed, not the partition's"
        )
    if not failure.assigned:
        return RetakePlan(False, 0.0, "the member's assignment no longer gives it the partition")
    newer = failure.checkpoint_generation
    if newer is not None and newer > failure.generation:
        return RetakePlan(
            False,
            0.0,
            f"a checkpoint of generation {newer} (the member's is {failure.generation}) shows a newer owner",
        )
    delay = retake_delay(failure.failures)
    return RetakePlan(
        True,
        delay,
        f"no newer owner (failure {failure.failures} in a row): the member takes it back in {delay:g}s",
    )
