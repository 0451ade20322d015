"""Misplaced records (ordo/epochs/placement.py), pure: the rule as stated, the same rule in the
shape of the readers' hot path (``checks``, ``judge``), and the batch scans that apply it (the C
pass of _fastscan.c and its Python twin) all agree. Consumed batches and the readers' policies:
tests/integration/test_misplaced_records.py."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Message
from hypothesis import given, settings
from hypothesis import strategies as st

from ordo import AsyncConsumer, ConfigError, GatedConsumer
from ordo._batch_scan import scan_python
from ordo._fastscan import scan as c_scan
from ordo.epochs import EpochHistory
from ordo.epochs.placement import NO_END, Check, checks, judge, misplacement, topic_checks
from ordo.partitioners import murmur2_partition


def _key(belongs: dict[int, int], tries: int = 10_000) -> bytes:
    """A key murmur2 puts in ``belongs[count]`` under each of those counts."""
    for i in range(tries):
        key = f"key-{i}".encode()
        if all(murmur2_partition(key, count) == p for count, p in belongs.items()):
            return key
    raise AssertionError(f"no key for {belongs}")


# 3 -> 4 (thresholds 10, 20, 30), then 4 -> 6 (thresholds 40, 50, 60, 70)
HISTORY = (
    EpochHistory.initial("orders", 3)
    .begin_fence(4)
    .publish({0: 10, 1: 20, 2: 30})
    .begin_fence(6)
    .publish({0: 40, 1: 50, 2: 60, 3: 70})
)
ACTIVE = HISTORY.active_epochs


def test_a_record_placed_by_the_previous_count_after_the_threshold_is_misplaced() -> None:
    key = _key({3: 1, 4: 2})  # in 1 under 3 partitions, in 2 under 4
    found = misplacement(ACTIVE, 1, 20, key)
    assert found is not None
    assert (found.epoch, found.partitions, found.belongs, found.placed_by) == (1, 4, 2, 3)
    assert "orders[1]@20" in found.describe("orders") and "belongs in partition 2" in found.describe("orders")
    assert misplacement(ACTIVE, 1, 19, key) is None, "before the threshold: epoch 0, placed right"


def test_a_record_placed_by_a_count_two_epochs_back_is_misplaced() -> None:
    key = _key({3: 2, 4: 3, 6: 5})  # a producer that missed both expansions
    found = misplacement(ACTIVE, 2, 60, key)
    assert found is not None and (found.epoch, found.belongs, found.placed_by) == (2, 5, 3)


def test_what_is_never_misplaced() -> None:
    stale = _key({3: 1, 4: 2})
    assert misplacement(ACTIVE, 1, 25, stale) is not None, "the check can fail"
    assert misplacement(ACTIVE, 1, 25, None) is None, "keyless"
    assert misplacement(ACTIVE, 1, 5, stale) is None, "epoch 0"
    never = EpochHistory.initial("plain", 3).active_epochs
    assert misplacement(never, 1, 1000, stale) is None, "a topic ordo never expanded"
    elsewhere = _key({3: 0, 4: 0, 6: 0})
    assert misplacement(ACTIVE, 1, 25, elsewhere) is None, "no count puts it here: explicit or round-robin"
    right = _key({3: 0, 4: 1})
    assert misplacement(ACTIVE, 1, 25, right) is None, "where its epoch's count puts it"
    # partition 3 was created by epoch 1: its records are epoch 1's until epoch 2's threshold (70)
    into_3 = _key({4: 3, 6: 5})
    assert misplacement(ACTIVE, 3, 10, into_3) is None, "a partition the epoch created"
    assert misplacement(ACTIVE, 3, 70, _key({4: 3, 6: 1})) is not None, "... an old one of the next epoch"
    assert misplacement(ACTIVE, 5, 0, stale) is None, "created by the latest epoch"


def test_the_checked_ranges_of_each_partition_newest_first() -> None:
    assert checks(ACTIVE, 0) == (Check(40, NO_END, 6, (4, 3), 2), Check(10, 40, 4, (3,), 1))
    assert checks(ACTIVE, 3) == (Check(70, NO_END, 6, (4, 3), 2),), "created by epoch 1: epoch 2's alone"
    assert checks(ACTIVE, 4) == () and checks(ACTIVE, 5) == ()
    assert topic_checks(EpochHistory.initial("plain", 3).active_epochs) == {}
    aborted = EpochHistory.initial("t", 2).begin_fence(4).abort().begin_fence(3).publish({0: 5, 1: 6})
    assert topic_checks(aborted.active_epochs) == {
        0: (Check(5, NO_END, 3, (2,), 2),),
        1: (Check(6, NO_END, 3, (2,), 2),),
    }, "an aborted epoch placed nothing"


@st.composite
def histories(draw: st.DrawFn) -> EpochHistory:
    """1-3 expansions (some aborted) of 1-5 partitions, thresholds in any order."""
    history = EpochHistory.initial("t", draw(st.integers(1, 5)))
    for _ in range(draw(st.integers(1, 3))):
        count = history.active.partitions + draw(st.integers(1, 4))
        history = history.begin_fence(count)
        if draw(st.booleans()) and draw(st.booleans()):
            history = history.abort()
        else:
            old = history.current.from_partitions or 0
            history = history.publish({p: draw(st.integers(0, 25)) for p in range(old)})
    return history


_pool = st.sampled_from([f"key-{i}".encode() for i in range(64)])
keys = st.one_of(st.none(), st.binary(max_size=7), _pool, _pool)  # a quarter keyless


def records(history: EpochHistory, size: int) -> st.SearchStrategy[list[tuple[int, int, bytes | None, bool]]]:
    """Records (partition, offset, key, is an error event) of the topic's partitions (and one
    past them), at offsets around its thresholds: about one in twelve is misplaced."""
    partitions = st.integers(0, history.active.partitions)
    return st.lists(
        st.tuples(partitions, st.integers(0, 45), keys, st.booleans()), min_size=size, max_size=size
    )


@settings(max_examples=300)
@given(histories().flatmap(lambda h: st.tuples(st.just(h), records(h, 10))))
def test_the_hot_paths_shape_agrees_with_the_rule_as_stated(
    drawn: tuple[EpochHistory, list[tuple[int, int, bytes | None, bool]]],
) -> None:
    history, found_records = drawn
    active = history.active_epochs
    for partition, offset, key, _ in found_records:
        expected = misplacement(active, partition, offset, key)
        assert judge(checks(active, partition), partition, offset, key) == expected


@settings(max_examples=200)
@given(
    histories().flatmap(lambda h: st.tuples(st.just(h), st.integers(0, 30).flatmap(lambda n: records(h, n))))
)
def test_the_c_scan_and_its_python_twin_find_what_the_rule_finds(
    drawn: tuple[EpochHistory, list[tuple[int, int, bytes | None, bool]]],
) -> None:
    history, records = drawn
    active = history.active_epochs
    eof = KafkaError(KafkaError._PARTITION_EOF)
    batch = [
        Message(topic="t", partition=p, offset=o, key=k, error=eof if error else None)
        for p, o, k, error in records
    ]
    rules = topic_checks(active)
    expected = [
        i
        for i, (p, o, k, error) in enumerate(records)
        if not error and misplacement(active, p, o, k) is not None
    ]
    assert scan_python(batch, rules)[3] == expected
    assert c_scan(batch, rules)[3] == expected
    assert c_scan(batch)[3] == [] and c_scan(batch, None)[3] == [], "no rules: nothing checked"


def test_the_c_scan_refuses_rules_it_cannot_read() -> None:
    batch = [Message(topic="t", partition=1, offset=3, key=b"k")]
    with pytest.raises(TypeError, match="rules must be a dict"):
        c_scan(batch, [(1, ())])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"rules\[1\]"):
        c_scan(batch, {1: [Check(0, NO_END, 4, (2,), 1)]})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="at least 1"):
        c_scan(batch, {1: (Check(0, NO_END, 4, (0,), 1),)})


@pytest.mark.parametrize("wrong", ["drop", "Raise", None, 3])
def test_a_policy_the_consumers_do_not_know_is_refused_before_anything_starts(wrong: object) -> None:
    config = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}
    with pytest.raises(ConfigError, match=r"on_misplaced must be 'raise'.*'deliver'.*callable"):
        GatedConsumer(config, ["t"], on_misplaced=wrong)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="on_misplaced must be"):
        AsyncConsumer(config, ["t"], gate=True, on_misplaced=wrong)  # type: ignore[arg-type]


def test_an_ungated_async_consumer_refuses_a_policy_it_would_never_apply() -> None:
    config = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}
    with pytest.raises(ConfigError, match="on_misplaced needs gate=True"):
        AsyncConsumer(config, ["t"], on_misplaced="deliver")
