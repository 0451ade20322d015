"""KIP-983's two-step revocation as a pure state machine (no Kafka, no clock of its own).

A revocation is *requested* (the group took partitions away), then *reported* to the user in a
poll result (``to_be_revoked``), then *completed* at the start of the poll after that, unless the
user called ``delay`` since the report, which postpones it by one more poll. A partition still
pending at its deadline is *lost*: it is never committed again and ``delay`` leaves it out.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["Revocations"]

P = TypeVar("P", bound=Hashable)


@dataclass
class _Pending:
    deadline: float
    reported: bool = False
    delayed: bool = False


@dataclass
class Revocations(Generic[P]):
    pending: dict[P, _Pending] = field(default_factory=dict)
    completed: set[P] = field(default_factory=set)
    """Completed and not yet taken by whoever finishes the revocation (``take_resolved``)."""
    lost: set[P] = field(default_factory=set)
    """Lost and not yet taken by whoever finishes the revocation."""
    unreported_lost: set[P] = field(default_factory=set)
    """Lost since the last poll result (KIP-983 ``lost``)."""

    def request(self, partitions: Iterable[P], deadline: float) -> None:
        for p in partitions:
            if p not in self.pending:
                self.pending[p] = _Pending(deadline)

    def start_poll(self) -> set[P]:
        """The start of a user poll: complete what was reported and not delayed; returns it."""
        done: set[P] = set()
        for p, state in list(self.pending.items()):
            if state.delayed:
                state.delayed = False
            elif state.reported:
                del self.pending[p]
                done.add(p)
        self.completed |= done
        return done

    def report(self) -> tuple[frozenset[P], frozenset[P]]:
        """What a poll result says: (to_be_revoked, lost since the last poll)."""
        for state in self.pending.values():
            state.reported = True
        lost = frozenset(self.unreported_lost)
        self.unreported_lost.clear()
        return frozenset(self.pending), lost

    def has_news(self) -> bool:
        """Something the user has not been told yet (a poll should return early for it)."""
        return bool(self.unreported_lost) or any(not s.reported for s in self.pending.values())

    def delay(self, partitions: Iterable[P]) -> set[P]:
        """Postpone completion by one poll of those of ``partitions`` still pending; returns them.
        The others are left alone: lost, completed, or never revoked, there is nothing to delay,
        and refusing all for them would let the pending ones complete with work unfinished."""
        delayed: set[P] = set()
        for p in partitions:
            state = self.pending.get(p)
            if state is not None:
                state.delayed = True
                delayed.add(p)
        return delayed

    def expire(self, now: float) -> set[P]:
        """Pending partitions past their deadline become lost; returns them."""
        gone = {p for p, s in self.pending.items() if now >= s.deadline}
        self.lose(gone)
        return gone

    def lose(self, partitions: Iterable[P]) -> None:
        for p in partitions:
            self.pending.pop(p, None)
            self.completed.discard(p)
            self.lost.add(p)
            self.unreported_lost.add(p)

    def complete_now(self, partitions: Iterable[P]) -> None:
        """Complete without waiting for the user (closing)."""
        for p in partitions:
            if self.pending.pop(p, None) is not None:
                self.completed.add(p)

    def resolved(self, partitions: Iterable[P]) -> bool:
        return not any(p in self.pending for p in partitions)

    def take_resolved(self, partitions: Iterable[P]) -> tuple[set[P], set[P]]:
        """(completed, lost) among ``partitions``, forgotten here (lost stays reportable)."""
        wanted = set(partitions)
        completed, lost = self.completed & wanted, self.lost & wanted
        self.completed -= completed
        self.lost -= lost
        return completed, lost
