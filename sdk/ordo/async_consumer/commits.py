"""When to commit and what. Pure, no Kafka.

Commits are aggregated: one commit per ``interval`` seconds, or sooner once ``every`` records were
done since the last one, and only for partitions whose position moved past what was committed. A
position past a gate's threshold is committed at once (``urge``); what a failed commit carried is
sent again after the interval, whether or not more records were done meanwhile (``failed``).
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
        self._urged = False
        self._failed = False

    def urge(self) -> None:
        """Commit what is done at the next chance: a position passed a threshold another
        member's gate may be waiting for."""
        self._urged = True

    def failed(self) -> None:
        """A commit failed (a rebalance, a coordinator move): commit again after the interval
        even if nothing more is done. An idle consumer would otherwise never send it, and a gate
        of another member may be waiting for it."""
        self._failed = True

    def note_done(self, records: int = 1) -> None:
        self.pending += records

    def due(self, now: float) -> bool:
        if self._urged:
            return True
        waiting = self.pending > 0 or self._failed
        return self.pending >= self.every or (waiting and now - self._last >= self.interval)

    def committed(self, now: float) -> None:
        self.pending = 0
        self._last = now
        self._urged = self._failed = False


def to_commit(positions: Mapping[P, int | None], committed: Mapping[P, int]) -> dict[P, int]:
    """Positions that moved past the last commit (partitions never read from are left out)."""
    return {
        p: position
        for p, position in positions.items()
        if position is not None and position > committed.get(p, -1)
    }
