"""An OrderedProducer's fence and lease as pure state machines (its threads apply them).

``TopicFence``: where one topic's fence stands (the epoch log's news moves it, an acknowledged
report ends its wait). ``LeaseState``: until when the producer may queue records at all (a report that
arrived renews it; one that cannot be sent past it stops the producer until the epoch log is read
again). A topic takes every record only while ``writable``: not fenced, and the producer neither
stopped nor closed (nor held by a commit of its own). During a fence it has acknowledged, it
still takes the records whose partition the fence does not change (``staying``, issue 43): the
rest wait (``parks``) until the epoch is published or aborted. No lock, no Kafka, no clock: the
caller passes the time and holds the locks.

Why a staying record may be written during the fence: the fence exists so that no record placed
by the old count lands in an old partition past its threshold (read once every producer
acknowledged or was fenced through Kafka). A key with murmur2(key) % old == murmur2(key) % new is
placed in the same partition by both counts, so its records are where the new epoch wants them
whether they land before or after the threshold, in the order they were handed over; a keyless
record has no key order and any old partition exists under the new count. Only moved keys' records
would land misplaced, so only they wait, and they go by the count the fence ends with.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .epochs import EpochHistory, EpochState

__all__ = ["LeaseState", "TopicFence", "parks", "staying", "staying_writable", "writable"]


@dataclass(frozen=True)
class TopicFence:
    """One topic's fence, as this producer applied and reported it."""

    blocked: bool = False
    """No record of the topic may be queued: a fence is applied (or the topic is not reported yet)."""
    epoch: int = -1
    """The fencing epoch the producer stopped for."""
    acked: int = -1
    """The fencing epoch it reported as acknowledged."""
    partitions: int = 0
    """The fencing epoch's partition count (0: none known, e.g. a topic not reported yet)."""

    @classmethod
    def unreported(cls) -> TopicFence:
        """A topic met for the first time: blocked until the registry has the producer's report,
        so every fence waits for it."""
        return cls(blocked=True)

    def seen(self, history: EpochHistory) -> TopicFence:
        """After the epoch log's latest history of the topic: blocked while an epoch fences."""
        current = history.current
        if current.state == EpochState.FENCING:
            return replace(self, blocked=True, epoch=current.epoch, partitions=current.partitions)
        return replace(self, blocked=False, partitions=0)

    @property
    def unacknowledged(self) -> int | None:
        """The fencing epoch applied (no record can follow) but not yet acknowledged."""
        return self.epoch if self.blocked and self.acked < self.epoch else None

    def acknowledged(self, epoch: int) -> TopicFence:
        """A report acknowledging ``epoch`` arrived."""
        return replace(self, acked=max(self.acked, epoch))


@dataclass(frozen=True)
class LeaseState:
    """Until when (``time.monotonic()``) the producer may queue records: a session after the last
    report that arrived was sent, less a margin. The operator may judge it gone once a session
    passes without a report, and a record queued then could land after the thresholds."""

    until: float = 0.0
    stopped: bool = False
    """It lapsed (or is being checked): the epoch log is read again before it is renewed."""

    def holds(self, now: float) -> bool:
        return not self.stopped and now < self.until

    def renewed(self, sent: float, session: float, margin: float) -> LeaseState:
        """A report sent at ``sent`` arrived (after a lapse: once the epoch log was read again)."""
        return LeaseState(max(self.until, sent + session - margin), stopped=False)

    def extended(self, sent: float, session: float, margin: float, now: float) -> LeaseState:
        """A first report for a new topic arrived: it extends the lease only while it holds; a
        lapsed producer resumes through the heartbeat, which reads the epoch log again first."""
        if not self.holds(now):
            return self
        return replace(self, until=max(self.until, sent + session - margin))

    def unreported(self, now: float) -> LeaseState:
        """A report could not be sent: past the lease the producer stops."""
        return self.stop() if now >= self.until else self

    def stop(self) -> LeaseState:
        return replace(self, stopped=True)


def writable(fence: TopicFence, lease: LeaseState, closed: bool, held: bool = False) -> bool:
    """Whether the topic takes records now (the lease's time is checked per record apart);
    ``held``: the producer's own transaction is being committed, or records of an aborted one are
    still to send again (they go first)."""
    return not fence.blocked and not lease.stopped and not closed and not held


def staying_writable(
    fence: TopicFence, lease: LeaseState, closed: bool, held: bool = False, before_ack: bool = False
) -> bool:
    """Whether the topic takes its ``staying`` records while fenced: the fence's new count is known
    and nothing else holds the producer. ``before_ack``: from the moment the fence is applied (with
    ordo's own transactions: the acknowledgement waits for a commit of the records the fence
    moves, whatever staying records follow them); otherwise once the fence is acknowledged (the
    acknowledgement waits for the producer's whole queue to drain, which a flow of staying
    records would keep from happening)."""
    return (
        fence.blocked
        and fence.partitions > 0
        and (before_ack or fence.acked >= fence.epoch)
        and not lease.stopped
        and not closed
        and not held
    )


def staying(key_hash: int | None, old: int, new: int) -> bool:
    """Whether a record goes to the same partition by the ``old`` and the ``new`` count: its key's
    non-negative murmur2 hash (``to_positive``) modulo both is the same; a keyless record (None) has
    no key order to keep and every partition under ``old`` exists under ``new``."""
    return key_hash is None or key_hash % old == key_hash % new


def parks(key_hash: int | None, old: int, new: int) -> bool:
    """Whether a record handed over during an acknowledged fence waits for its end (the epoch
    published: then by ``new``; aborted: by ``old``): its key moves."""
    return not staying(key_hash, old, new)
