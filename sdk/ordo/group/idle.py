"""A member's idle limit (KIP-509's ``alive()``), pure: like a consumer's ``max.poll.interval.ms``.

The Lease says the *process* lives; this clock says whether its *work* does. It runs only while
the member owns partitions, from when it took them, and every ``alive()`` call or committed unit
starts it again. A member whose clock runs past the limit (a hung copy loop, Kafka out of reach)
gives its partitions up so other members take them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["IdleClock"]


@dataclass
class IdleClock:
    """Times on one monotonic clock (seconds)."""

    limit: float
    last_active: float | None = None
    """None while the member owns nothing: the clock does not run."""

    def start(self, now: float) -> None:
        """The member owns partitions (again): the clock runs from now unless it already runs."""
        if self.last_active is None:
            self.last_active = now

    def stop(self) -> None:
        """The member owns nothing: it cannot be idle with anyone's partitions."""
        self.last_active = None

    def touch(self, now: float) -> None:
        """``alive()`` or a committed unit."""
        if self.last_active is not None:
            self.last_active = max(self.last_active, now)

    def change_limit(self, limit: float, now: float) -> None:
        """A new ``maxIdleSeconds`` from the group's settings. A longer one applies at once; a
        shorter one counts from when the member took it: the member was idle within the old
        limit, and stepping out for the change itself would move its partitions for nothing. So
        the deadline becomes the earlier of the old one and ``now + limit``."""
        if self.last_active is not None and limit < self.limit:
            self.last_active = min(self.last_active + self.limit - limit, max(self.last_active, now))
        self.limit = limit

    def left(self, now: float) -> float | None:
        """Seconds until the limit (<= 0: past it), or None while the clock does not run."""
        if self.last_active is None:
            return None
        return self.last_active + self.limit - now
