"""KIP-369 round-robin rotation: even, no skips or doubles, availability and growth honoured."""

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from ordo.partitioners import RoundRobinPartitioner, usable_partitions


def test_an_unavailable_partitions_share_goes_evenly_to_the_others() -> None:
    p = RoundRobinPartitioner()
    down = frozenset({3})
    counts = Counter(p.partition(b"k", 7, unavailable=down) for _ in range(60_000))
    assert 3 not in counts and set(counts.values()) == {10_000}


def test_every_partition_once_per_cycle_whatever_the_key() -> None:
    p = RoundRobinPartitioner()
    chosen = [p.partition(f"key-{i % 3}".encode(), 7) for i in range(70)]
    for cycle in range(10):
        assert sorted(chosen[cycle * 7 : cycle * 7 + 7]) == list(range(7))


@given(st.lists(st.tuples(st.integers(1, 12), st.frozensets(st.integers(0, 11), max_size=4)), min_size=1))
def test_the_rotation_continues_after_the_last_partition_when_the_set_changes(
    phases: list[tuple[int, frozenset[int]]],
) -> None:
    p = RoundRobinPartitioner()
    last = -1
    for count, down in phases:
        usable = usable_partitions(count, None, down)
        for _ in range(len(usable) + 1):
            chosen = p.partition(None, count, unavailable=down)
            expected = next((u for u in usable if u > last), usable[0])
            assert chosen == expected  # the next usable partition: no skip, no double advance
            last = chosen


def test_nothing_usable_falls_back_to_all_partitions() -> None:
    assert usable_partitions(3, [5], frozenset()) == (0, 1, 2)
    assert usable_partitions(3, None, frozenset({0, 1, 2})) == (0, 1, 2)
    assert usable_partitions(4, [3, 1, 1], frozenset({1})) == (3,)
