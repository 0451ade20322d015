"""What a TopicAutoscaler's daemon writes and says (pure): its status after a decision, the
conditions and Events of their transitions, a refusal of bad input, and what a name already taken
by an expansion means. The daemon (``ordo_operator.autoscalers``) reads, calls these, and applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ordo.api import Condition, TopicAutoscalerStatus
from ordo.api.common import set_condition
from ordo.api.topic_autoscaler import MeasuredLoad

from .autoscale import Decision, Load, Outcome

__all__ = [
    "ENDED",
    "Event",
    "Shown",
    "after_conflict",
    "forget_refusal",
    "measured_load",
    "refused",
    "shown",
]

ENDED = frozenset({"Completed", "Aborted", "Failed"})


@dataclass(frozen=True)
class Event:
    type: str  # Normal or Warning
    reason: str
    message: str


@dataclass(frozen=True)
class Shown:
    """The status after a decision, the Events of the conditions it entered (each also a decision
    counted in the metrics), and whether anything people look at changed."""

    status: TopicAutoscalerStatus
    events: tuple[Event, ...]
    changed: bool


def measured_load(newest: Load, current: int, records_per_offset: float, at: datetime) -> MeasuredLoad:
    """The newest measurement per partition of today's count, as status shows it."""
    return MeasuredLoad(
        records_per_second_per_partition=round(newest.records_per_second / current, 3),
        bytes_per_second_per_partition=round(newest.bytes_per_second / current, 1),
        lag_per_partition={g: round(lag / current, 1) for g, lag in newest.lag.items()},
        records_per_offset=round(records_per_offset, 3),
        measured_at=at,
    )


def shown(
    status: TopicAutoscalerStatus,
    decision: Decision,
    current: int,
    load: MeasuredLoad,
    maximum: int,
    generation: int | None,
) -> Shown:
    """``status`` after ``decision``: Ready True, AtMaximum and BelowCapacity as the decision has
    them (entering one is an Event), the counts, the load and the message."""
    events: list[Event] = []
    conditions = set_condition(status.conditions, "Ready", True, "Measuring", decision.reason, generation)
    for kind, active, message in (
        (
            "AtMaximum",
            decision.outcome == Outcome.AT_MAXIMUM,
            f"{decision.reason}; the topic stays at {current} (maxPartitions {maximum})",
        ),
        (
            "BelowCapacity",
            decision.below_capacity,
            f"{decision.reason}: half the partitions would carry the load; a topic cannot shrink in "
            "place (moving the stream to a topic with fewer partitions is a separate step)",
        ),
    ):
        was = any(c.type == kind and c.status == "True" for c in status.conditions)
        if active and not was:
            events.append(Event("Normal", kind, message))
        conditions = set_condition(
            conditions, kind, active, kind if active else "No" + kind, message if active else ""
        )
    changed = (status.current_partitions, status.desired_partitions, _shape(status.conditions)) != (
        current,
        decision.desired,
        _shape(conditions),
    )
    after = status.model_copy(deep=True)
    after.current_partitions, after.desired_partitions = current, decision.desired
    after.load, after.conditions, after.message = load, conditions, decision.reason
    after.observed_generation = generation
    return Shown(after, tuple(events), changed)


def refused(
    status: TopicAutoscalerStatus, reason: str, message: str, said: str | None
) -> tuple[TopicAutoscalerStatus, Event | None]:
    """Bad input: ``status`` with Ready False for ``reason``, and the Warning to post unless this
    very message was the last one said (``said``); nothing else changes."""
    after = status.model_copy(deep=True)
    after.conditions = set_condition(status.conditions, "Ready", False, reason, message)
    after.message = message
    return after, None if said == message else Event("Warning", reason, message)


def forget_refusal(status: TopicAutoscalerStatus, reasons: tuple[str, ...]) -> bool:
    """Whether the refusal last said is gone (Ready's reason is one of ``reasons``, whose cause
    has passed): its next occurrence is news again."""
    ready = next((c for c in status.conditions if c.type == "Ready"), None)
    return ready is not None and ready.reason in reasons


def after_conflict(name: str, phase: str | None, target: int) -> str | None:
    """The expansion ``name`` the autoscaler wants exists already (409). None: it is its own,
    created before a restart (in flight, or gone meanwhile) and adopted; else why it refuses: one of
    that name ended without growing the topic, which a person must look at and delete."""
    if phase not in ENDED:
        return None
    return (
        f"{name} exists and ended {phase} without growing the topic to {target}: see its status, and "
        "delete it for the autoscaler to try again; nothing was changed"
    )


def _shape(conditions: list[Condition]) -> list[tuple[str, str, str]]:
    return [(c.type, c.status, c.reason) for c in conditions]
