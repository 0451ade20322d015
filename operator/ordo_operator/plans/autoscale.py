"""A TopicAutoscaler's decision (pure): load samples and the topic's state in, a decision out.

Each sample is the topic's whole load over one measuring interval (records/s, bytes/s, each target
group's lag), so the partitions it needs do not depend on today's count: load / target per
partition, the strictest target deciding. The topic grows only when every sample of the last
``window`` seconds needed more partitions than it has (the window's *least* need, as
HorizontalPodAutoscaler's scale-up stabilization), never while an expansion of the topic is in
flight (whoever created it) nor within ``cooldown`` seconds of the last one's end, never beyond
``max_partitions``; the growth policy picks the count. It never shrinks a topic: that is not
possible in place, and the decision says so when load falls well below today's count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from ordo.api import Growth
from ordo.epochs.history import prior_of

__all__ = [
    "Decision",
    "Load",
    "Outcome",
    "Policy",
    "Situation",
    "decide",
    "grown_count",
    "largest_prior_set",
    "needed_partitions",
]

BELOW_CAPACITY_RATIO = 0.5
"""Load that half of today's partitions would carry through the whole window is well below it."""


class Outcome(StrEnum):
    GROW = "grow"
    STEADY = "steady"  # load fits today's count
    STABILIZING = "stabilizing"  # load needs more, but not yet for the whole window
    IN_FLIGHT = "inFlight"  # an expansion of the topic is running
    COOLDOWN = "cooldown"
    AT_MAXIMUM = "atMaximum"  # load needs more than maxPartitions allows
    NO_DATA = "noData"  # no measurement yet


@dataclass(frozen=True)
class Load:
    """The topic's load over one measuring interval, from ``since`` to ``at`` (seconds, any clock)."""

    since: float
    at: float
    records_per_second: float
    bytes_per_second: float
    lag: Mapping[str, float] = field(default_factory=dict)
    """Each target consumer group's total committed-offset lag on the topic."""


@dataclass(frozen=True)
class Policy:
    min_partitions: int
    max_partitions: int
    window: float
    cooldown: float
    growth: Growth = Growth.DOUBLE
    records_per_partition: float | None = None
    bytes_per_partition: float | None = None
    lag_per_partition: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Situation:
    now: float
    partitions: int
    """The topic's partition count now."""
    samples: Sequence[Load]
    """Measurements, oldest first (older than the window are ignored)."""
    in_flight: str | None = None
    """An expansion of the topic that has not ended (any owner)."""
    ended_at: float | None = None
    """When the last expansion of the topic ended: the cooldown counts from here."""


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    desired: int
    """Partitions the window's load needs, within [min, max] (never below today's count)."""
    target: int | None
    """The count to grow to (only with GROW)."""
    reason: str
    below_capacity: bool = False
    """Load the whole window would fit in half of today's partitions: shrinking is not possible."""


def needed_partitions(load: Load, policy: Policy) -> tuple[int, str]:
    """Partitions ``load`` needs by the strictest target, and which target that is."""
    needs: list[tuple[int, str]] = []
    if policy.records_per_partition is not None:
        need = math.ceil(load.records_per_second / policy.records_per_partition)
        needs.append((need, f"{load.records_per_second:.1f} records/s"))
    if policy.bytes_per_partition is not None:
        need = math.ceil(load.bytes_per_second / policy.bytes_per_partition)
        needs.append((need, f"{load.bytes_per_second:.0f} bytes/s"))
    for group, per_partition in sorted(policy.lag_per_partition.items()):
        lag = load.lag.get(group, 0.0)
        needs.append((math.ceil(lag / per_partition), f"group {group!r} lag {lag:.0f}"))
    return max(needs, default=(1, "no target"), key=lambda n: n[0])


def largest_prior_set(old: int, new: int) -> int:
    """The most old partitions a key of one new partition may come from (``ordo.epochs``' prior
    sets; the last partition's is as large as any: it is not one of the old partitions)."""
    return len(prior_of(old, new, new - 1))


def grown_count(current: int, desired: int, maximum: int, growth: Growth) -> int:
    """The count to grow ``current`` to when ``desired`` (> current) partitions are needed, at most
    ``maximum``: by doubling, or the smallest count with the smallest prior sets."""
    desired = min(desired, maximum)
    if growth == Growth.DOUBLE:
        count = current
        while count < desired:
            count *= 2
        return min(count, maximum)
    multiple = math.ceil(desired / current) * current  # prior sets of one partition
    if multiple <= maximum:
        return multiple
    return min(range(desired, maximum + 1), key=lambda n: (largest_prior_set(current, n), n))


def decide(situation: Situation, policy: Policy) -> Decision:
    """What to do now; GROW only with a target above today's count."""
    current, now = situation.partitions, situation.now
    if current < policy.min_partitions and situation.in_flight is None:
        target = grown_count(current, policy.min_partitions, policy.max_partitions, policy.growth)
        reason = f"{current} partitions, below minPartitions {policy.min_partitions}"
        return Decision(Outcome.GROW, target, target, reason)
    window = [s for s in situation.samples if s.at >= now - policy.window and s.at <= now]
    if not window:
        return Decision(Outcome.NO_DATA, current, None, "no measurement yet")
    needs = [needed_partitions(s, policy) for s in window]
    (least, _), (most, _) = min(needs), max(needs)
    newest_need, newest_why = needs[-1]
    desired = max(current, min(max(least, policy.min_partitions), policy.max_partitions))
    # the window is covered when the measurements reach back to its start: a started or restarted
    # operator measures for a whole window before it decides
    covered = window[0].since <= now - policy.window
    below = covered and most <= current * BELOW_CAPACITY_RATIO and current > policy.min_partitions
    measured = f"{newest_why} needs {newest_need} partition(s)"
    if least <= current or not covered:
        if newest_need > current:
            since = f"for {now - _breach_start(window, needs, current):.0f} of {policy.window:.0f} s"
            return Decision(Outcome.STABILIZING, desired, None, f"{measured} {since}", below)
        if current >= policy.max_partitions and most > current:
            return Decision(Outcome.AT_MAXIMUM, desired, None, f"{measured}; at maxPartitions", below)
        return Decision(Outcome.STEADY, desired, None, f"{measured}; the topic has {current}", below)
    if current >= policy.max_partitions:
        return Decision(
            Outcome.AT_MAXIMUM,
            current,
            None,
            f"{measured} through the window, more than maxPartitions {policy.max_partitions}",
        )
    if situation.in_flight is not None:
        return Decision(Outcome.IN_FLIGHT, desired, None, f"{measured}; {situation.in_flight} is in flight")
    if situation.ended_at is not None and now - situation.ended_at < policy.cooldown:
        left = policy.cooldown - (now - situation.ended_at)
        return Decision(Outcome.COOLDOWN, desired, None, f"{measured}; cooldown {left:.0f} s left")
    target = grown_count(current, desired, policy.max_partitions, policy.growth)
    reason = f"{measured}, at least {least} through the last {policy.window:.0f} s; {current} -> {target}"
    return Decision(Outcome.GROW, desired, target, reason)


def _breach_start(window: Sequence[Load], needs: Sequence[tuple[int, str]], current: int) -> float:
    """When the newest run of samples needing more than ``current`` began."""
    start = window[-1].at
    for sample, (need, _) in zip(reversed(window), reversed(needs), strict=True):
        if need <= current:
            break
        start = sample.at
    return start
