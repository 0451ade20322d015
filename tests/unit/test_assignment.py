import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ordo.assignment import Strategy, assign, moved_partitions, standby_members

members_st = st.lists(st.text("abcdefgh", min_size=1, max_size=3), max_size=8, unique=True)


def _check_balanced(result: dict[str, list[int]], partitions: int, members: list[str]) -> None:
    assert set(result) == set(members)
    owned = [p for ps in result.values() for p in ps]
    assert sorted(owned) == list(range(partitions)), "every partition exactly once"
    sizes = [len(ps) for ps in result.values()]
    assert max(sizes) - min(sizes) <= 1
    assert all(ps == sorted(ps) for ps in result.values())


@pytest.mark.parametrize("strategy", list(Strategy))
@given(partitions=st.integers(0, 40), members=members_st.filter(bool), data=st.data())
def test_every_strategy_is_balanced_and_deterministic(
    strategy: Strategy, partitions: int, members: list[str], data: st.DataObject
) -> None:
    current = {m: data.draw(st.lists(st.integers(-2, 45), max_size=10)) for m in members}
    result = assign(partitions, members, current, strategy)
    _check_balanced(result, partitions, members)
    shuffled = data.draw(st.permutations(members))
    assert assign(partitions, shuffled, dict(reversed(list(current.items()))), strategy) == result


def _max_kept(partitions: int, members: list[str], current: dict[str, list[int]]) -> int:
    """Brute force: the most partitions any balanced assignment can leave where they are."""
    best = 0
    size, extra = divmod(partitions, len(members))
    for big in itertools.combinations(sorted(members), extra):
        quota = {m: size + (m in big) for m in members}
        # a partition claimed by two members can be kept by one only; assign greedily per partition
        kept = 0
        used = dict.fromkeys(members, 0)
        owners: dict[int, list[str]] = {}
        for m in sorted(members):
            for p in sorted(set(current.get(m, []))):
                if 0 <= p < partitions:
                    owners.setdefault(p, []).append(m)
        for p in sorted(owners):
            for m in owners[p][:1]:  # the lowest name keeps a doubly held partition
                if used[m] < quota[m]:
                    used[m] += 1
                    kept += 1
        best = max(best, kept)
    return best


@given(partitions=st.integers(0, 12), members=members_st.filter(bool), data=st.data())
def test_sticky_moves_the_fewest_partitions(partitions: int, members: list[str], data: st.DataObject) -> None:
    current = {m: data.draw(st.lists(st.integers(0, 13), max_size=6, unique=True)) for m in members}
    result = assign(partitions, members, current)
    kept = sum(
        1
        for m in members
        for p in result[m]
        if p in current[m] and min((o for o in members if p in current[o]), default=m) == m
    )
    assert kept == _max_kept(partitions, members, current)


def test_first_member_takes_everything_and_a_second_splits() -> None:
    one = assign(10, ["a"])
    assert one == {"a": list(range(10))}
    two = assign(10, ["a", "b"], one)
    assert two["a"] == [0, 1, 2, 3, 4] and two["b"] == [5, 6, 7, 8, 9]
    assert moved_partitions(one, two) == {5, 6, 7, 8, 9}


def test_members_beyond_partitions_stand_by_and_take_over() -> None:
    before = assign(2, ["a", "b", "c"])
    assert standby_members(before) == ["c"]
    after = assign(2, ["b", "c"], before)
    assert after == {"b": before["b"], "c": before["a"]}, "the standby takes the dead member's partition"


def test_a_leaving_member_moves_only_its_partitions() -> None:
    before = assign(9, ["a", "b", "c"])
    after = assign(9, ["a", "c"], before)
    assert moved_partitions(before, after) == set(before["b"])


def test_range_and_round_robin_layouts() -> None:
    assert assign(5, ["b", "a"], strategy="range") == {"a": [0, 1, 2], "b": [3, 4]}
    assert assign(5, ["b", "a"], strategy="roundRobin") == {"a": [0, 2, 4], "b": [1, 3]}


def test_bad_input_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown assignment strategy 'best': choose one of sticky, range"):
        assign(3, ["a"], strategy="best")
    with pytest.raises(ValueError, match="must not be negative"):
        assign(-1, ["a"])
    assert assign(3, []) == {}
