"""When the sandbox does what, and what a stage's outcome means. Pure: no I/O, no clock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["MIN_DURATION", "Stage", "Step", "member_name", "partitions_moved", "schedule"]

MIN_DURATION = 20.0  # below this the stages overlap their own rebalances


class Step(StrEnum):
    ADD_MEMBER = "member added"
    EXPAND = "expansion completed"
    KILL_MEMBER = "member killed, its partitions moved"
    JOIN_MEMBER = "member joined"
    STOP_WRITER = "source writer stopped"


@dataclass(frozen=True)
class Stage:
    step: Step
    at: float
    """Seconds after the data starts flowing; a stage also waits for the one before it to finish."""


# Spread over the run so that data flows between stages: each disturbance is seen under load.
_PLAN = (
    (Step.ADD_MEMBER, 0.15),
    (Step.EXPAND, 0.35),
    (Step.KILL_MEMBER, 0.6),
    (Step.JOIN_MEMBER, 0.8),
    (Step.STOP_WRITER, 1.0),
)


def schedule(duration: float) -> tuple[Stage, ...]:
    """The stages of a run whose data flows for ``duration`` seconds."""
    if duration < MIN_DURATION:
        raise ValueError(f"--duration must be at least {MIN_DURATION:g} seconds, got {duration:g}")
    return tuple(Stage(step, round(duration * fraction, 3)) for step, fraction in _PLAN)


def member_name(group: str, index: int) -> str:
    return f"{group}-{index}"


def partitions_moved(
    victim: str, taken: Sequence[int], owners: Mapping[str, Sequence[int]], members: int
) -> bool:
    """After a kill: every partition the victim had is owned by one of the ``members`` others."""
    if victim in owners or len(owners) != members:
        return False
    owned = {p for partitions in owners.values() for p in partitions}
    return set(taken) <= owned
