from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ordo.partitioners import (
    ExplicitPartitioner,
    Murmur2Partitioner,
    RoundRobinPartitioner,
    make_partitioner,
    murmur2,
    murmur2_partition,
    murmur2_partitions,
    murmur2_partitions_python,
    murmur2_python,
    to_positive,
)

# Values published in Apache Kafka's UtilsTest.testMurmur2 (clients/src/test/.../utils/UtilsTest.java).
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), JAVA_MURMUR2.items())
def test_murmur2_matches_java(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected
    assert murmur2_python(key) == expected


def test_murmur2_is_the_c_hash_when_built() -> None:
    """CI builds the C module (setup.py, a compiler on the machine): murmur2 must not silently be
    the Python twin, 20-30 times slower per record."""
    assert type(murmur2).__name__ == "builtin_function_or_method"


@given(st.binary(max_size=80))
def test_the_c_murmur2_equals_its_python_twin(key: bytes) -> None:
    assert murmur2(key) == murmur2_python(key)


def test_murmur2_partitions_is_the_c_function_when_built() -> None:
    assert type(murmur2_partitions).__name__ == "builtin_function_or_method"


_KEYS = st.lists(st.one_of(st.binary(max_size=40), st.text(max_size=20), st.none()), max_size=60)


@given(_KEYS, st.integers(1, 300))
def test_the_c_murmur2_partitions_equals_its_python_twin(keys: list[bytes | str | None], n: int) -> None:
    expected = murmur2_partitions_python(keys, n)
    assert murmur2_partitions(keys, n) == expected
    assert murmur2_partitions(tuple(keys), n) == expected
    present = [k.encode() if isinstance(k, str) else k for k in keys if k is not None]
    if len(present) == len(keys):  # each key's own partition, str keys as their UTF-8 bytes
        assert expected == {murmur2_partition(k, n) for k in present}
    else:  # a keyless record may go to any partition
        assert expected == frozenset(range(n))


@pytest.mark.parametrize("partitions_of", [murmur2_partitions, murmur2_partitions_python])
def test_murmur2_partitions_rejects_what_it_cannot_place(partitions_of: Any) -> None:
    with pytest.raises(ValueError, match="at least 1, got 0"):
        partitions_of([b"k"], 0)
    with pytest.raises(TypeError, match="keys must be bytes, str or None, got int"):
        partitions_of([b"k", 7], 3)


def test_to_positive_clears_sign_bit_not_abs() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert murmur2_partition(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7


@given(st.binary(max_size=64))
def test_murmur2_is_signed_32_bit(key: bytes) -> None:
    assert -(2**31) <= murmur2(key) < 2**31


@given(st.binary(max_size=40), st.integers(1, 1000))
def test_cached_partitioner_agrees_with_plain_hash(key: bytes, n: int) -> None:
    p = Murmur2Partitioner(cache_size=4)
    assert p.partition(key, n) == p.partition(key, n) == murmur2_partition(key, n)


def test_keyless_records_spread_round_robin() -> None:
    p = Murmur2Partitioner()
    assert [p.partition(None, 3) for _ in range(6)] == [0, 1, 2, 0, 1, 2]


def test_round_robin_is_even_over_100k_records() -> None:
    p = RoundRobinPartitioner()
    counts = Counter(p.partition(b"same-key", 7) for _ in range(100_000))
    assert set(counts) == set(range(7))
    assert max(counts.values()) - min(counts.values()) <= 1


@given(st.integers(2, 32), st.data())
def test_round_robin_spreads_evenly_over_available_partitions(n: int, data: st.DataObject) -> None:
    available = data.draw(st.lists(st.integers(0, n - 1), min_size=1, unique=True))
    p = RoundRobinPartitioner()
    rounds = data.draw(st.integers(1, 20))
    counts = Counter(p.partition(None, n, available=available) for _ in range(rounds * len(available)))
    assert set(counts) == set(available)
    assert set(counts.values()) == {rounds}


def test_round_robin_uses_new_partitions_from_the_next_record() -> None:
    p = RoundRobinPartitioner()
    before = [p.partition(None, 3) for _ in range(3)]
    after = [p.partition(None, 6) for _ in range(6)]
    assert sorted(before) == [0, 1, 2]
    assert sorted(after) == list(range(6))


def test_explicit_partition_must_exist() -> None:
    assert ExplicitPartitioner().partition(None, 4, explicit=3) == 3
    with pytest.raises(ValueError, match="partition 4 does not exist: the topic has 4 partitions"):
        ExplicitPartitioner().partition(None, 4, explicit=4)
    with pytest.raises(ValueError, match="needs a partition"):
        ExplicitPartitioner().partition(b"k", 4)
    with pytest.raises(ValueError, match="does not exist"):
        Murmur2Partitioner().partition(b"k", 4, explicit=-1)


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Murmur2Partitioner().partition(b"k", 0)


def test_make_partitioner_names_the_choices() -> None:
    assert isinstance(make_partitioner("round_robin"), RoundRobinPartitioner)
    with pytest.raises(ValueError, match="unknown partitioner 'sticky': choose one of murmur2, round_robin"):
        make_partitioner("sticky")
