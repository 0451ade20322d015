"""``ordo sandbox --autoscale``'s plan: the load ramp, the TopicAutoscaler it creates, and when each
growth reached the readers. Pure: no I/O, no clock."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["AutoscaleSettings", "Growth", "Ramp", "first_reads", "peak_rate"]


@dataclass(frozen=True)
class Ramp:
    """The produced rate grows linearly from ``start`` to ``end`` records/s over ``seconds``, then
    stays at ``end`` for ``hold`` seconds (so the last growth is read while data flows)."""

    start: float
    end: float
    seconds: float
    hold: float = 0.0

    def __post_init__(self) -> None:
        if self.start <= 0 or self.end <= 0:
            raise ValueError(f"the ramp's rates must be positive, got {self.start:g} -> {self.end:g}")
        if self.seconds <= 0 or self.hold < 0:
            raise ValueError(
                f"the ramp needs a positive duration, got {self.seconds:g} s (hold {self.hold:g} s)"
            )

    @property
    def total_seconds(self) -> float:
        return self.seconds + self.hold

    def rate_at(self, t: float) -> float:
        """Records per second ``t`` seconds after the start (0 before and after)."""
        if t < 0 or t > self.total_seconds:
            return 0.0
        if t >= self.seconds:
            return self.end
        return self.start + (self.end - self.start) * t / self.seconds

    def due(self, t: float) -> int:
        """Records due by ``t`` seconds: the integral of :meth:`rate_at` from 0, rounded down."""
        t = min(max(t, 0.0), self.total_seconds)
        ramp = min(t, self.seconds)
        area = self.start * ramp + (self.end - self.start) * ramp * ramp / (2 * self.seconds)
        return math.floor(area + self.end * max(0.0, t - self.seconds) + 1e-9)

    def share(self, of: int) -> Ramp:
        """One of ``of`` equal load generators' part of this ramp."""
        if of < 1:
            raise ValueError(f"at least one load generator, got {of}")
        return Ramp(self.start / of, self.end / of, self.seconds, self.hold)

    def when(self, rate: float) -> float | None:
        """Seconds until the ramp first reaches ``rate`` (None: never)."""
        if rate <= self.start:
            return 0.0
        if rate > max(self.start, self.end):
            return None
        return self.seconds * (rate - self.start) / (self.end - self.start)


@dataclass(frozen=True)
class AutoscaleSettings:
    """The TopicAutoscaler the sandbox creates: demo-sized pace (a short window and cooldown, a
    measurement a second), a records/s target per partition."""

    min_partitions: int = 4
    max_partitions: int = 16
    target: float = 1000.0
    """Records per second one partition should carry at most."""
    window: int = 5
    """stabilizationWindowSeconds"""
    cooldown: int = 10
    """cooldownSeconds"""
    interval: float = 1.0
    """measureIntervalSeconds"""
    fence_timeout: int = 30

    def __post_init__(self) -> None:
        if not 1 <= self.min_partitions <= self.max_partitions:
            raise ValueError(
                f"partitions: need 1 <= min <= max, got min {self.min_partitions}, max {self.max_partitions}"
            )
        if self.target <= 0:
            raise ValueError(f"the target must be positive records/s per partition, got {self.target:g}")
        if self.window < 0 or self.cooldown < 0 or self.interval < 0.5:
            raise ValueError("window and cooldown must be >= 0 s, the measure interval >= 0.5 s")

    def spec(self, topic: str) -> dict[str, Any]:
        """The TopicAutoscaler's spec (camelCase, as the API server takes it)."""
        return {
            "topic": topic,
            "minPartitions": self.min_partitions,
            "maxPartitions": self.max_partitions,
            "targets": {"recordsPerSecondPerPartition": self.target},
            "stabilizationWindowSeconds": self.window,
            "cooldownSeconds": self.cooldown,
            "measureIntervalSeconds": self.interval,
            "fenceTimeoutSeconds": self.fence_timeout,
        }

    def expected_growths(self, partitions: int, ramp: Ramp) -> list[tuple[int, int]]:
        """The doublings the ramp's end rate calls for, from ``partitions`` (a guide for people:
        what the operator decides is measured)."""
        growths = []
        while partitions < self.max_partitions and ramp.end > partitions * self.target:
            grown = min(partitions * 2, self.max_partitions)
            growths.append((partitions, grown))
            partitions = grown
        return growths


@dataclass
class Growth:
    """One growth the autoscaler decided, timed in seconds after the data started flowing."""

    from_partitions: int
    to_partitions: int
    decided_at: float
    """status.lastDecision.time: the target breached through the whole window."""
    reason: str = ""
    expansion: str = ""
    completed_at: float | None = None
    """When its expansion reached Completed (None: it did not)."""
    consumers_at: float | None = None
    """The first record of a new partition the GatedConsumers processed (None: none)."""
    spark_at: float | None = None
    """The first record of a new partition in the Spark pipeline's committed output (None: none)."""
    crossed_at: float | None = None
    """When the ramp's rate first exceeded the old count times the target (the window starts then)."""

    @property
    def new_partitions(self) -> range:
        return range(self.from_partitions, self.to_partitions)

    def to_consumers(self) -> float | None:
        return None if self.consumers_at is None else self.consumers_at - self.decided_at

    def to_spark(self) -> float | None:
        return None if self.spark_at is None else self.spark_at - self.decided_at


def first_reads(growths: Iterable[Growth], reads: Iterable[tuple[float, int]]) -> list[float | None]:
    """For each growth, the earliest time in ``reads`` ((time, partition) pairs, any order) of a
    partition it created; None when no read touched them."""
    spans = [g.new_partitions for g in growths]
    first: list[float | None] = [None] * len(spans)
    for at, partition in reads:
        for i, span in enumerate(spans):
            seen = first[i]
            if partition in span and (seen is None or at < seen):
                first[i] = at
    return first


def peak_rate(history: Sequence[tuple[float, int]], span: float = 5.0) -> float:
    """The highest rate over any ``span`` seconds of ``history`` ((seconds, count so far) samples in
    time order); over the whole history when it is shorter."""
    best, j = 0.0, 0
    for t, count in history:
        while j + 1 < len(history) and t - history[j + 1][0] >= span:
            j += 1
        t0, count0 = history[j]
        if t > t0:
            best = max(best, (count - count0) / (t - t0))
    return best
