"""When to commit and what. Pure, no Kafka.

Commits are aggregated: one commit per ``interval`` seconds, or sooner once ``every`` records were
done since the last one, and only for partitions whose position moved past what was committed.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

__all__ = ["CommitPolicy", "to_commit"]

P = TypeVar("P", bound=Hashable)


class CommitPolicy:
    """Counts processed records and says when the next aggregated commit is due."""

    def __init__(self, interval: float, every: int, now: float = 0.0) -> None:
        if interval <= 0:
            raise ValueError(f"commit interval must be positive, got {interval}")
        if every < 1:
            raise ValueError(f"commit count must be at least 1, got {every}")
        self.interval = interval
        self.every = every
        self.pending = 0
        self._last = now

    def note_done(self, records: int = 1) -> None:
        self.pending += records

    def due(self, now: float) -> bool:
        return self.pending >= self.every or (self.pending > 0 and now - self._last >= self.interval)

    def committed(self, now: float) -> None:
        self.pending = 0
        self._last = now


def to_commit(positions: Mapping[P, int | None], committed: Mapping[P, int]) -> dict[P, int]:
    """Positions that moved past the last commit (partitions never read from are left out)."""
    return {
        p: position
        for p, position in positions.items()
        if position is not None and position > committed.get(p, -1)
    }
