"""Epochs that move a stream to another topic (issue 44's model): any partition count, prior sets
that include the old partition of the same number, histories that say where the keys live, and
bytes unchanged for histories that never move."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ordo.epochs import Epoch, EpochError, EpochHistory, EpochState
from ordo.epochs.history import epoch_of, prior_of
from ordo.partitioners import murmur2_partition

counts = st.tuples(st.integers(1, 24), st.integers(1, 24))


@given(counts, st.lists(st.binary(min_size=1, max_size=12), min_size=1, max_size=50))
def test_a_moved_key_comes_from_its_prior_set_whatever_the_counts(
    old_new: tuple[int, int], keys: list[bytes]
) -> None:
    old, new = old_new
    for key in keys:
        p, q = murmur2_partition(key, old), murmur2_partition(key, new)
        assert p in prior_of(old, new, q, moved=True)


@given(counts)
def test_no_smaller_prior_set_works_across_topics(old_new: tuple[int, int]) -> None:
    """Every old partition listed can hold a key that lands in q, and no other can."""
    old, new = old_new
    for q in range(new):
        prior = prior_of(old, new, q, moved=True)
        for p in range(old):
            possible = any(h % new == q and h % old == p for h in range(old * new))
            assert possible == (p in prior)


def _moved(old: int = 8, new: int = 4) -> EpochHistory:
    return EpochHistory.initial("orders", old).begin_move("orders-v2", new)


def test_a_move_to_fewer_partitions_publishes_with_every_old_partitions_threshold() -> None:
    fencing = _moved()
    assert fencing.fencing and fencing.stream_topic == "orders"  # not moved until published
    assert fencing.begin_move("orders-v2", 4) == fencing  # idempotent for the same target
    moved = fencing.publish({p: 10 * p for p in range(8)})
    assert moved.stream_topic == "orders-v2" and moved.active.partitions == 4
    assert moved.active.prior_of(1) == (1, 5)  # gcd(8, 4) = 4: old 1 and 5, its own number too
    assert all(moved.active.created(q) for q in range(4))
    assert EpochHistory.model_validate_json(moved.model_dump_json()) == moved
    grown = moved.begin_fence(8).publish({q: 0 for q in range(4)})  # then it grows in its new topic
    assert grown.stream_topic == "orders-v2" and grown.active.prior_of(5) == (1,)


def test_histories_that_never_move_write_the_same_bytes_as_before() -> None:
    history = EpochHistory.initial("orders", 4).begin_fence(8).publish({p: 1 for p in range(4)})
    assert all("topic" not in epoch for epoch in json.loads(history.model_dump_json())["epochs"])


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: EpochHistory.initial("orders", 4).begin_move("orders", 2), "where it is"),
        (lambda: _moved().publish({0: 1}), "every old partition"),
        (lambda: _moved().begin_move("other", 4), "still fencing"),
        (lambda: _moved().publish({p: 0 for p in range(8)}).begin_move("orders-v2", 2), "where it is"),
        (lambda: Epoch(epoch=0, partitions=4, state=EpochState.ACTIVE, topic="x"), "no topic to move to"),
    ],
)
def test_bad_moves_are_refused_saying_why(make: object, says: str) -> None:
    with pytest.raises((EpochError, ValueError), match=says):
        make()  # type: ignore[operator]


def test_a_move_back_to_the_first_topic_is_a_move() -> None:
    there = _moved().publish({p: 0 for p in range(8)})
    back = there.begin_move("orders", 6).publish({q: 0 for q in range(4)})
    assert back.stream_topic == "orders" and back.active.prior_of(0) == (0, 2)


def test_readers_that_cannot_follow_a_move_say_so_instead_of_misplacing_records() -> None:
    moved = _moved().publish({p: 0 for p in range(8)})
    with pytest.raises(EpochError, match="cannot follow"):
        epoch_of(moved.active_epochs, 1, 5)
