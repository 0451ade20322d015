"""The pure parts a gated AsyncConsumer adds (issue 35, item 6), without Kafka: its completed
offsets pass transaction markers once every record before is done, and a position past a
threshold is committed at the next chance."""

from __future__ import annotations

from ordo.async_consumer.commits import CommitPolicy
from ordo.async_consumer.offsets import OffsetTracker


def test_markers_after_the_last_record_are_passed_once_every_record_is_done() -> None:
    """Records at 0, 2, 4 of a transactional producer (markers at 1, 3, 5): the fetch position is
    6. The position reaches 5 with the records done; 6, the threshold, only past the marker."""
    t = OffsetTracker()
    for offset in (0, 2, 4):
        t.add(offset)
    t.done_many([0, 2])
    assert not t.advance_to(6) and t.position == 4, "a record not done holds the position"
    t.done(4)
    assert t.position == 5
    assert t.advance_to(6) and t.position == 6
    assert not t.advance_to(6) and not t.advance_to(3), "never back, never twice"
    t.add(7)  # the next record comes after what was passed
    assert t.position == 7


def test_a_tracker_with_no_record_yet_starts_at_the_fetch_position() -> None:
    t = OffsetTracker()
    assert t.advance_to(40) and t.position == 40
    t.add(41)
    assert t.position == 41 and t.unfinished == 1


def test_a_threshold_passed_makes_the_commit_due_at_once() -> None:
    policy = CommitPolicy(interval=60.0, every=10_000, now=0.0)
    policy.note_done(3)
    assert not policy.due(1.0)
    policy.urge()
    assert policy.due(1.0)
    policy.committed(1.0)
    policy.note_done()
    assert not policy.due(2.0), "urged once: the next commit is aggregated again"


def test_a_failed_commit_is_sent_again_after_the_interval_with_nothing_more_done() -> None:
    """An idle consumer whose last commit failed (a rebalance) commits it again: another
    member's gate may be waiting for exactly that commit."""
    policy = CommitPolicy(interval=1.0, every=10_000, now=0.0)
    policy.note_done(5)
    assert policy.due(1.0)
    policy.committed(1.0)
    policy.failed()  # the answer, later: nothing more is done meanwhile
    assert not policy.due(1.5) and policy.due(2.0)
    policy.committed(2.0)
    assert not policy.due(10.0), "committed: nothing more to send"
