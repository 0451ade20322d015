"""How long a member may count on its Lease, pure: its own clock, not the operator's word.

The operator moves a member's partitions once its Lease is older than the session. A member whose
process was stopped (SIGSTOP, a frozen VM, a long GC) does not hear of it: when it wakes, every
thread goes on where it was, the copy loop included. In exactly-once mode the next owner's
``init_transactions`` fences it; in at-least-once mode nothing would. So the member judges itself:
past ``LAPSE_FRACTION`` of the session since the start of its last successful renewal, it counts
its partitions as possibly moved and produces nothing more until it gave them up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["LAPSE_FRACTION", "LeaseClock"]

LAPSE_FRACTION = 0.8
"""Of the session: the member stops before the operator's judgement (renewTime + session), with a
fifth of the session to spare for the two clocks' skew and the renewal request's own time."""


@dataclass
class LeaseClock:
    """Times on one monotonic clock (seconds)."""

    valid_until: float = math.inf
    """Past it the Lease may have expired; infinite while no session is known (nothing owned)."""

    def renewed(self, started: float, session: float) -> None:
        """A renewal that began at ``started`` succeeded, under ``session`` (0: none known yet).
        A session changed meanwhile takes effect here, at the renewal it causes, never before:
        until then the operator judges the Lease by the session it was renewed under."""
        self.valid_until = started + session * LAPSE_FRACTION if session > 0 else math.inf

    def lapsed(self, now: float) -> bool:
        return now > self.valid_until
