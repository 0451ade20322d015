"""AsyncConsumer's pure parts: commit positions, the ordering scheduler, commit aggregation and
KIP-983's two-step revocation, without Kafka."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ordo.async_consumer.commits import CommitPolicy, to_commit
from ordo.async_consumer.offsets import OffsetTracker
from ordo.async_consumer.revocations import Revocations
from ordo.async_consumer.scheduler import Scheduler

# -- OffsetTracker -----------------------------------------------------------------------------


def test_position_is_the_first_record_not_done() -> None:
    t = OffsetTracker()
    assert t.position is None
    for offset in (5, 6, 7, 9):  # 8 is a transaction marker: no record
        t.add(offset)
    assert t.position == 5
    assert not t.done(7) and t.position == 5
    assert t.done(5) and t.position == 6
    assert t.done(6) and t.position == 9  # 7 was already done
    assert t.done(9) and t.position == 10
    assert t.unfinished == 0


def test_fetched_but_not_handed_out_holds_the_position() -> None:
    t = OffsetTracker()
    t.add(0)
    t.add(1)
    t.done(1)
    assert t.position == 0 and t.unfinished == 1


def test_offsets_must_increase() -> None:
    t = OffsetTracker()
    t.add(3)
    with pytest.raises(ValueError, match="must increase"):
        t.add(3)


def test_unknown_offsets_are_ignored() -> None:
    t = OffsetTracker()
    t.add(10)
    assert not t.done(2) and not t.done(11) and t.position == 10


def test_truncating_a_revoked_partition_keeps_the_gaps_below_what_was_handed_out() -> None:
    t = OffsetTracker()
    for offset in range(10):
        t.add(offset)
    t.done(0)
    t.done(4)  # key mode handed 4 out before 1..3
    assert t.highest_done() == 4
    assert t.truncate_after(4) == 5 and t.unfinished == 3 and t.position == 1
    for offset in (1, 2, 3):
        t.done(offset)
    assert t.position == 5 and t.unfinished == 0 and t.highest_done() == 4


@given(st.lists(st.integers(1, 3), min_size=1, max_size=60), st.randoms(use_true_random=False))
def test_position_never_passes_an_unfinished_record(gaps: list[int], rnd: random.Random) -> None:
    offsets = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    t = OffsetTracker()
    for o in offsets:
        t.add(o)
    order = offsets[:]
    rnd.shuffle(order)
    finished: set[int] = set()
    for o in order:
        t.advance_to(offsets[-1] + 5)  # markers passed: never past a record not done
        t.done(o)
        finished.add(o)
        expected = next((x for x in offsets if x not in finished), offsets[-1] + 1)
        assert t.position == expected
    assert t.advance_to(offsets[-1] + 5) and t.position == offsets[-1] + 5


# -- Scheduler ---------------------------------------------------------------------------------


def _drain_one_at_a_time(s: Scheduler[str, str], keys: dict[str, bytes | None]) -> list[str]:
    out: list[str] = []
    while True:
        taken = s.take(100)
        if not taken:
            return out
        for partition, item in taken:
            out.append(item)
            s.release(partition, keys[item])


def test_partition_mode_hands_out_one_record_per_partition() -> None:
    s: Scheduler[str, str] = Scheduler("partition")
    for i in range(3):
        s.add("p0", b"a", f"p0-{i}")
        s.add("p1", b"b", f"p1-{i}")
    first = s.take(100)
    assert sorted(item for _, item in first) == ["p0-0", "p1-0"]
    assert s.take(100) == []
    s.release("p0", b"a")
    assert s.take(100) == [("p0", "p0-1")]
    assert s.total == 3


def test_key_mode_runs_keys_in_parallel_and_each_key_in_order() -> None:
    s: Scheduler[str, str] = Scheduler("key")
    s.add("p0", b"a", "a0")
    s.add("p0", b"b", "b0")
    s.add("p0", b"a", "a1")
    s.add("p0", None, "n0")
    s.add("p0", None, "n1")
    assert sorted(item for _, item in s.take(100)) == ["a0", "b0", "n0"]
    s.release("p0", b"b")
    assert s.take(100) == []  # b has nothing more; a and keyless wait for their previous record
    s.release("p0", b"a")
    s.release("p0", None)
    assert sorted(item for _, item in s.take(100)) == ["a1", "n1"]


@given(st.lists(st.tuples(st.sampled_from(["p0", "p1"]), st.sampled_from([b"a", b"b", b"c", None]))))
def test_key_mode_keeps_every_keys_order(records: list[tuple[str, bytes | None]]) -> None:
    s: Scheduler[str, str] = Scheduler("key")
    keys: dict[str, bytes | None] = {}
    for i, (partition, key) in enumerate(records):
        item = f"{partition}/{key!r}/{i:04d}"
        keys[item] = key
        s.add(partition, key, item)
    out = _drain_one_at_a_time(s, keys)
    assert sorted(out) == sorted(keys)
    for lane in {item.rsplit("/", 1)[0] for item in out}:
        mine = [item for item in out if item.rsplit("/", 1)[0] == lane]
        assert mine == sorted(mine)


def test_unordered_interleaves_partitions_and_respects_the_limit() -> None:
    s: Scheduler[str, int] = Scheduler("unordered")
    for i in range(10):
        s.add("p0", None, i)
        s.add("p1", None, 100 + i)
    taken = s.take(6)
    assert len(taken) == 6 and {p for p, _ in taken} == {"p0", "p1"}
    assert [i for p, i in taken if p == "p0"] == sorted(i for p, i in taken if p == "p0")
    assert s.total == 14 and s.buffered("p0") + s.buffered("p1") == 14


def test_drop_forgets_a_partition_even_with_a_record_in_flight() -> None:
    s: Scheduler[str, str] = Scheduler("partition")
    s.add("p0", None, "x0")
    s.add("p0", None, "x1")
    s.add("p1", None, "y0")
    assert s.take(1) == [("p0", "x0")]
    assert s.drop("p0") == 1 and s.drop("p1") == 1
    s.release("p0", None)  # a release after the drop is harmless
    assert s.take(10) == [] and s.total == 0


def test_drop_can_keep_some_records_in_their_lanes() -> None:
    s: Scheduler[str, int] = Scheduler("key")
    for offset, key in enumerate([b"a", b"b", b"a", b"c", b"b"]):
        s.add("p0", key, offset)
    assert [i for _, i in s.take(1)] == [0]  # a is busy now
    assert s.drop("p0", keep=lambda offset: offset <= 2) == 2  # 3 and 4 dropped
    assert sorted(i for _, i in s.take(10)) == [1]
    s.release("p0", b"a")
    assert [i for _, i in s.take(10)] == [2] and s.total == 0


def test_unknown_ordering_names_the_choices() -> None:
    with pytest.raises(ValueError, match="partition, key, unordered"):
        Scheduler("fifo")  # type: ignore[arg-type]


# -- commits -----------------------------------------------------------------------------------


def test_commits_are_aggregated_by_count_and_interval() -> None:
    policy = CommitPolicy(interval=1.0, every=100, now=0.0)
    assert not policy.due(5.0)  # nothing done: nothing to commit however long it has been
    policy.note_done(99)
    assert not policy.due(0.5)
    policy.note_done()
    assert policy.due(0.5)
    policy.committed(0.5)
    policy.note_done()
    assert not policy.due(1.4) and policy.due(1.5)


def test_only_moved_positions_are_committed() -> None:
    assert to_commit({"a": 5, "b": 3, "c": None}, {"a": 5, "b": 2}) == {"b": 3}


def test_commit_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="interval"):
        CommitPolicy(0, 10)
    with pytest.raises(ValueError, match="count"):
        CommitPolicy(1, 0)


# -- revocations (KIP-983) ---------------------------------------------------------------------


def test_revocation_completes_at_the_poll_after_it_was_reported() -> None:
    r: Revocations[str] = Revocations()
    r.request(["p0"], deadline=10)
    assert r.has_news()
    assert r.start_poll() == set()  # not reported yet
    assert r.report() == (frozenset({"p0"}), frozenset())
    assert not r.has_news()
    assert r.start_poll() == {"p0"}
    assert r.resolved(["p0"]) and r.take_resolved(["p0"]) == ({"p0"}, set())


def test_delay_postpones_by_one_poll_each_time() -> None:
    r: Revocations[str] = Revocations()
    r.request(["p0", "p1"], deadline=10)
    r.report()
    assert r.delay(["p0"]) == {"p0"}
    assert r.start_poll() == {"p1"}
    assert r.report()[0] == frozenset({"p0"})
    assert r.start_poll() == {"p0"}


def test_deadline_loses_the_partition_and_delay_is_refused() -> None:
    r: Revocations[str] = Revocations()
    r.request(["p0"], deadline=10)
    r.report()
    assert r.delay(["p0"]) == {"p0"}
    assert r.expire(9.9) == set()
    assert r.expire(10.0) == {"p0"}
    assert r.delay(["p0"]) == set()
    assert r.report() == (frozenset(), frozenset({"p0"}))
    assert r.report() == (frozenset(), frozenset())  # lost is reported once
    assert r.take_resolved(["p0"]) == (set(), {"p0"})


def test_delay_of_a_completed_or_unknown_partition_is_refused() -> None:
    r: Revocations[str] = Revocations()
    r.request(["p0"], deadline=10)
    r.report()
    r.start_poll()
    assert r.delay(["p0"]) == set() and r.delay(["other"]) == set()


def test_delay_holds_the_pending_partitions_of_a_mixed_set() -> None:
    """One partition lost (an earlier revocation's deadline) or not being revoked must not make
    the others complete with their work unfinished: those still pending are delayed, and named."""
    r: Revocations[str] = Revocations()
    r.request(["early"], deadline=10)
    r.request(["late"], deadline=20)
    r.report()
    assert r.expire(10) == {"early"}
    assert r.delay(["early", "late", "kept"]) == {"late"}
    assert r.start_poll() == set()  # "late" stays open one more poll
    assert r.report() == (frozenset({"late"}), frozenset({"early"}))
    assert r.start_poll() == {"late"}


def test_closing_completes_without_the_user() -> None:
    r: Revocations[str] = Revocations()
    r.request(["p0"], deadline=10)
    r.complete_now(["p0"])
    assert r.resolved(["p0"]) and r.take_resolved(["p0"]) == ({"p0"}, set())
