"""An OrderedProducer's fence and lease (``ordo.fence``), by property over any sequence of what
its threads see: the epoch log's histories, reports that arrive or not, time passing. The
ordering promise rests on two of them: a topic fenced in the log takes no record until the log
says otherwise, and a producer whose lease lapsed takes none until a report renews it."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from ordo.epochs import EpochHistory
from ordo.fence import LeaseState, TopicFence, writable

SESSION, MARGIN = 10.0, 2.0


def _histories() -> list[EpochHistory]:
    """A topic's history through two expansions, one aborted: each state a fence can meet."""
    h0 = EpochHistory.initial("t", 2)
    h1 = h0.begin_fence(4)
    h2 = h1.publish({0: 5, 1: 7})
    h3 = h2.begin_fence(8)
    h4 = h3.abort()
    h5 = h4.begin_fence(8)
    return [h0, h1, h2, h3, h4, h5]


HISTORIES = _histories()


@dataclass
class Producer:
    """The fence and lease as the producer's threads move them, and what the operator saw."""

    fence: TopicFence = field(default_factory=TopicFence.unreported)
    lease: LeaseState = field(default_factory=LeaseState)
    now: float = 100.0
    history: EpochHistory = HISTORIES[0]
    reported: set[int] = field(default_factory=set)  # fencing epochs acknowledged to the registry


events = st.lists(
    st.one_of(
        st.tuples(st.just("history"), st.integers(0, len(HISTORIES) - 1)),
        st.tuples(st.just("report"), st.booleans()),  # arrived or not
        st.tuples(st.just("wait"), st.floats(0, 2 * SESSION)),
        st.tuples(st.just("reread"), st.just(0)),
    ),
    max_size=40,
)


@given(events)
def test_no_record_is_taken_while_fenced_or_lapsed_and_a_fence_is_acknowledged_only_once_applied(
    steps: list[tuple[str, object]],
) -> None:
    p = Producer()
    for kind, arg in steps:
        if kind == "history":
            p.history = HISTORIES[int(arg)]  # type: ignore[call-overload]
            p.fence = p.fence.seen(p.history)
        elif kind == "report":
            pending = p.fence.unacknowledged
            if arg:  # what the heartbeat reports: the fences applied, never one it has not applied
                if pending is not None:
                    assert p.fence.blocked, "an acknowledged fence is applied"
                    p.reported.add(pending)
                    p.fence = p.fence.acknowledged(pending)
                p.lease = p.lease.renewed(p.now, SESSION, MARGIN)
            else:
                p.lease = p.lease.unreported(p.now)
        elif kind == "wait":
            p.now += float(arg)  # type: ignore[arg-type]
        else:
            p.lease = p.lease.stop()
        takes = writable(p.fence, p.lease, closed=False) and p.lease.holds(p.now)
        if p.history.fencing:
            assert not takes, "a topic fenced in the epoch log takes no record"
        if p.lease.stopped or p.now >= p.lease.until:
            assert not takes, "a lapsed or stopped producer takes no record"
        assert p.fence.acked in p.reported | {-1}
        assert p.lease.until <= p.now + SESSION - MARGIN, "never beyond a session after a report"
    assert not writable(p.fence, p.lease, closed=True), "a closed producer takes nothing"


@given(st.floats(0, 100), st.floats(0, 100), st.floats(0, 100))
def test_the_lease_only_grows_while_it_holds_and_a_lapsed_one_waits_for_a_renewal(
    start: float, sent: float, later: float
) -> None:
    lease = LeaseState().renewed(start, SESSION, MARGIN)
    now = start + later
    extended = lease.extended(sent, SESSION, MARGIN, now)
    if lease.holds(now):
        assert extended.until == max(lease.until, sent + SESSION - MARGIN)
    else:
        assert extended == lease, "a lapsed lease is not extended by a new topic's report"
    stopped = lease.unreported(now)
    assert stopped.stopped == (now >= lease.until)
    assert not stopped.renewed(now, SESSION, MARGIN).stopped, "a report that arrived resumes it"


def test_a_fence_is_to_acknowledge_once_and_the_topic_resumes_when_the_epoch_is_published() -> None:
    h0, h1, h2 = HISTORIES[:3]
    fence = TopicFence.unreported().seen(h0)
    assert not fence.blocked and fence.unacknowledged is None
    fence = fence.seen(h1)
    assert fence.blocked and fence.unacknowledged == 1
    fence = fence.acknowledged(1)
    assert fence.blocked and fence.unacknowledged is None, "acknowledged, still blocked until published"
    fence = fence.seen(h2)
    assert not fence.blocked and fence.acked == 1
