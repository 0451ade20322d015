"""Which session each member's Lease is judged by, pure.

A member renews its Lease every third of the session its assignment told it, and writes that
session into the Lease (``leaseDurationSeconds``). When ``sessionTimeoutSeconds`` shrinks, a live
member renews at the old pace until it has taken the assignment carrying the new value: judged at
once by the shorter session it would look expired, and its partitions would move because of the
settings change alone. So a Lease that says it runs on a longer session than the spec's is judged
by that longer one until the member acknowledges an assignment carrying the spec's session, and
for at most one of its own sessions from the pass that first saw it so (a member that never takes
the new value is then judged by it). A restarted operator starts that clock again: it delays the
new session's effect, never skips it. A longer session takes effect at once (it only waits more).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ordo.api.producer_group import MAX_SESSION_TIMEOUT_SECONDS
from ordo.member_wire import MemberAssignment, ProtocolError

__all__ = ["LeaseSessions", "LeaseView", "lease_sessions"]


@dataclass(frozen=True)
class LeaseView:
    """A member's Lease (named after its pod)."""

    name: str
    holder: str | None
    renewed: datetime | None
    acked: int | None
    duration: float | None = None
    """``leaseDurationSeconds``: the session the member renews under (a third of it apart)."""


@dataclass(frozen=True)
class LeaseSessions:
    """The session (seconds) each Lease is judged by in one pass."""

    spec: float
    longer: Mapping[str, float] = field(default_factory=dict)
    """Members still judged by the longer session their Lease announces."""
    since: Mapping[str, datetime] = field(default_factory=dict)
    """When a pass first judged each of ``longer`` so: the next pass's input."""

    def of(self, member: str) -> float:
        return self.longer.get(member, self.spec)


def lease_sessions(
    spec_seconds: float,
    leases: Mapping[str, LeaseView],
    assignment_of: Callable[[str], str | None],
    now: datetime,
    since: Mapping[str, datetime],
) -> LeaseSessions:
    """This pass's sessions. ``assignment_of`` gives a member pod's assignment annotation (read
    only for Leases announcing a longer session); ``since`` is the previous pass's ``since``."""
    longer: dict[str, float] = {}
    started: dict[str, datetime] = {}
    for name, lease in leases.items():
        announced = min(lease.duration or 0.0, MAX_SESSION_TIMEOUT_SECONDS)
        if lease.holder != name or announced <= spec_seconds:
            continue
        if _took(assignment_of(name), lease.acked, spec_seconds):
            continue  # it renews at the new pace since it took the assignment carrying it
        first = since.get(name, now)
        if now - first >= timedelta(seconds=announced):
            continue  # one old session passed: the spec's session is in force for it too
        longer[name], started[name] = announced, first
    return LeaseSessions(spec_seconds, longer, started)


def _took(annotation: str | None, acked: int | None, spec_seconds: float) -> bool:
    """Whether the member acknowledged an assignment that carries a session no longer than the spec's."""
    if annotation is None or acked is None:
        return False
    try:
        assignment = MemberAssignment.from_annotation(annotation)
    except ProtocolError:
        return False
    settings = assignment.settings
    return (
        settings is not None
        and settings.session_timeout_seconds <= spec_seconds
        and acked >= assignment.generation
    )
