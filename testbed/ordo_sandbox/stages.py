"""When the sandbox does what, what a stage's outcome means, and the names of what it creates.
Pure: no I/O, no clock."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "MIN_DURATION",
    "Stage",
    "Step",
    "member_name",
    "partitions_moved",
    "resource_prefix",
    "schedule",
    "topic_name_problem",
]

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


_KAFKA_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_PREFIX_LENGTH = 40  # "<prefix>-cdc-<member>" stays a valid label value (63 characters at most)


def topic_name_problem(topic: str) -> str | None:
    """Why Kafka would refuse ``topic`` as a topic name, or None when it is valid."""
    if topic in (".", ".."):
        return "'.' and '..' are not topic names"
    if not _KAFKA_TOPIC.fullmatch(topic):
        return "a topic name has 1 to 249 characters, each a letter, a digit, '.', '_' or '-'"
    return None


def resource_prefix(topic: str) -> str:
    """The start of the Kubernetes names the sandbox derives from a (valid) topic name: the group
    ``<prefix>-cdc``, its members ``<prefix>-cdc-<n>`` (Pods, Leases, the ``app`` label) and the
    expansion ``<prefix>-to-8``. Lower case, '-' for what a DNS label cannot hold; when that
    changed the name, a hash of the topic keeps two topics apart (``orders_1``, ``orders-1``)."""
    prefix = re.sub(r"[^a-z0-9]+", "-", topic.lower()).strip("-")[:_PREFIX_LENGTH].strip("-")
    if prefix == topic:
        return prefix
    digest = hashlib.sha256(topic.encode()).hexdigest()[:6]
    return f"{prefix}-{digest}" if prefix else f"topic-{digest}"


def partitions_moved(
    victim: str, taken: Sequence[int], owners: Mapping[str, Sequence[int]], members: int
) -> bool:
    """After a kill: every partition the victim had is owned by one of the ``members`` others."""
    if victim in owners or len(owners) != members:
        return False
    owned = {p for partitions in owners.values() for p in partitions}
    return set(taken) <= owned
