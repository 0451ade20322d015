"""The ordo-kafka source's offset planning, without Spark: gates, limits, data loss, epochs."""

from __future__ import annotations

import random
import zlib
from collections import defaultdict

import pytest

from ordo.epochs import EpochHistory, GateKeeper
from ordo.epochs.placement import NO_END
from ordo_spark.options import parse_options
from ordo_spark.planning import (
    DataLossError,
    Offsets,
    Plan,
    Slice,
    Watermarks,
    all_epoch_segments,
    available_now_target,
    decode,
    encode,
    epoch_segments,
    initial_offsets,
    pack,
    plan_batch,
    slices,
)

T = "orders"


def marks(**partitions: tuple[int, int]) -> dict[str, dict[int, Watermarks]]:
    return {T: {int(p[1:]): Watermarks(*lh) for p, lh in partitions.items()}}


def expanded(*steps: tuple[int, dict[int, int]], start: int = 3) -> EpochHistory:
    """A history from ``start`` partitions through each (target, thresholds) expansion."""
    history = EpochHistory.initial(T, start)
    for target, thresholds in steps:
        history = history.begin_fence(target).publish(thresholds)
    return history


def plan(
    start: Offsets,
    wm: dict[str, dict[int, Watermarks]],
    history: EpochHistory | None,
    *,
    max_records: int | None = None,
    gate: bool = True,
    fail_on_data_loss: bool = True,
    target: Offsets | None = None,
) -> Plan:
    return plan_batch(
        start,
        wm,
        {T: history},
        max_records=max_records,
        gate=gate,
        fail_on_data_loss=fail_on_data_loss,
        target=target,
    )


def test_offsets_survive_json_with_string_keys() -> None:
    offsets = {T: {0: 5, 10: 7}}
    raw = encode(offsets)
    assert raw == {T: {"0": 5, "10": 7}}
    assert decode(raw) == offsets


def test_without_history_everything_available_is_read() -> None:
    result = plan({T: {0: 1, 1: 0}}, marks(p0=(0, 10), p1=(0, 4), p2=(0, 3)), None)
    assert result.end == {T: {0: 10, 1: 4, 2: 3}}  # partition 2 is new: read from 0
    assert result.held == ()


def test_record_limit_is_shared_in_proportion_and_exact() -> None:
    result = plan(
        {T: {0: 0, 1: 0, 2: 0}}, marks(p0=(0, 600), p1=(0, 300), p2=(0, 100)), None, max_records=101
    )
    taken = {p: o for p, o in result.end[T].items()}
    assert sum(taken.values()) == 101
    assert taken[0] > taken[1] > taken[2] > 0


def test_doubling_holds_new_partitions_until_their_old_partition_is_done() -> None:
    history = expanded((6, {0: 100, 1: 100, 2: 100}))
    wm = marks(p0=(0, 150), p1=(0, 150), p2=(0, 150), p3=(0, 40), p4=(0, 40), p5=(0, 40))
    first = plan({T: {0: 50, 1: 50, 2: 50}}, wm, history)
    # old partitions never wait when doubling; each new one waits for its single old partition
    assert first.end == {T: {0: 150, 1: 150, 2: 150, 3: 0, 4: 0, 5: 0}}
    assert {(h.partition, h.offset): dict(h.gate.waiting_for) for h in first.held} == {
        (3, 0): {0: 100},
        (4, 0): {1: 100},
        (5, 0): {2: 100},
    }
    # in the same batch as the old partition reaches its threshold is not enough: the next one
    second = plan(first.end, wm, history)
    assert second.end == {T: {0: 150, 1: 150, 2: 150, 3: 40, 4: 40, 5: 40}}
    assert second.held == ()


def test_six_to_eight_holds_an_old_partition_at_its_threshold() -> None:
    history = expanded((6, dict.fromkeys(range(3), 0)), (8, dict.fromkeys(range(6), 100)))
    wm = marks(**{f"p{p}": (0, 130) for p in range(6)}, p6=(0, 20), p7=(0, 20))
    start = {T: {p: 90 for p in range(6)} | {6: 0, 7: 0}}
    result = plan(start, wm, history)
    # every partition holds keys moved from others (gcd 2): all wait at 100, none reads past it
    assert result.end[T] == {p: 100 for p in range(6)} | {6: 0, 7: 0}
    held = {h.partition: dict(h.gate.waiting_for) for h in result.held}
    assert held[0] == {2: 100, 4: 100}
    assert held[7] == {1: 100, 3: 100, 5: 100}


def test_the_gate_is_transitive_through_earlier_epochs() -> None:
    # 3 -> 6 -> 8: a key now in 7 may have been in 3 in epoch 1, and in 0 in epoch 0. Partition 3
    # may hold none of that key's epoch-1 records, so 7 must also wait for 0's epoch-1 threshold.
    history = expanded((6, {0: 50, 1: 50, 2: 50}), (8, dict.fromkeys(range(6), 80)))
    wm = marks(**{f"p{p}": (0, 80) for p in range(6)}, p6=(0, 10), p7=(0, 10))
    start = {T: {0: 40, 1: 80, 2: 80, 3: 80, 4: 80, 5: 80, 6: 0, 7: 0}}
    result = plan(start, wm, history)
    held = {h.partition: dict(h.gate.waiting_for) for h in result.held}
    assert held[7] == {0: 50}
    assert result.end[T][7] == 0


def test_partitions_of_an_epoch_still_fencing_are_not_read() -> None:
    history = expanded((6, {0: 10, 1: 10, 2: 10})).begin_fence(8)
    wm = marks(**{f"p{p}": (0, 10) for p in range(8)})
    result = plan({}, wm, history)
    assert set(result.end[T]) == set(range(6))


def test_gate_off_reads_everything() -> None:
    history = expanded((6, {0: 100, 1: 100, 2: 100}))
    wm = marks(p0=(0, 150), p1=(0, 150), p2=(0, 150), p3=(0, 40), p4=(0, 40), p5=(0, 40))
    result = plan({T: {0: 50, 1: 50, 2: 50}}, wm, history, gate=False)
    assert result.end[T][3] == 40 and result.held == ()


def test_the_limit_goes_to_partitions_that_may_be_read() -> None:
    history = expanded((6, {0: 100, 1: 100, 2: 100}))
    wm = marks(p0=(0, 150), p1=(0, 150), p2=(0, 150), p3=(0, 40), p4=(0, 40), p5=(0, 40))
    result = plan({T: {0: 50, 1: 50, 2: 50}}, wm, history, max_records=30)
    assert result.end[T] == {0: 60, 1: 60, 2: 60, 3: 0, 4: 0, 5: 0}


@pytest.mark.parametrize(
    ("start", "mark", "reason"),
    [
        ({T: {0: 5}}, marks(p0=(10, 20)), "offsets 5..9 were deleted"),
        ({T: {0: 30}}, marks(p0=(0, 20)), "past the end 20"),
        ({T: {0: 0, 1: 0}}, marks(p0=(0, 20)), "partition is gone"),
    ],
)
def test_data_loss_fails_clearly_or_is_skipped(
    start: Offsets, mark: dict[str, dict[int, Watermarks]], reason: str
) -> None:
    with pytest.raises(DataLossError, match=f"{reason}.*failOnDataLoss"):
        plan(start, mark, None)
    skipped = plan(start, mark, None, fail_on_data_loss=False)
    assert any(reason in line for line in skipped.lost)
    assert skipped.end[T][0] == 20


def test_epoch_segments_follow_thresholds() -> None:
    history = expanded((6, {0: 50, 1: 50, 2: 50}), (8, dict.fromkeys(range(6), 80)))
    assert epoch_segments(history, 0) == ((0, 0), (50, 1), (80, 2))
    assert epoch_segments(history, 4) == ((0, 1), (80, 2))
    assert epoch_segments(history, 7) == ((0, 2),)
    assert epoch_segments(None, 3) == ((0, 0),)
    piece = Slice(T, 0, 40, 90, epoch_segments(history, 0))
    assert [piece.epoch_at(o) for o in (40, 49, 50, 79, 80, 89)] == [0, 0, 1, 1, 2, 2]
    assert Slice(T, 0, 0, 1, ()).epoch_at(0) is None


def test_slices_one_per_partition_with_records() -> None:
    history = expanded((6, {0: 50, 1: 50, 2: 50}))
    pieces = slices({T: {0: 10, 1: 20}}, {T: {0: 60, 1: 20, 3: 5}}, {T: history})
    assert [(s.partition, s.start, s.end) for s in pieces] == [(0, 10, 60), (3, 0, 5)]
    assert pieces[0].epochs == ((0, 0), (50, 1))
    assert slices({T: {0: 0}}, {T: {0: 5}}, {})[0].epochs == ()  # gate off: epochs unknown


def test_slices_carry_the_ranges_where_a_record_may_be_misplaced() -> None:
    """3 -> 6 at 50, then 6 -> 8 at 80: a slice holds the checked ranges it overlaps (those a
    task looks at), none in epoch 0 or in a partition the epoch created, and none without the
    epoch log."""
    history = expanded((6, {0: 50, 1: 50, 2: 50}), (8, dict.fromkeys(range(6), 80)))
    pieces = slices({T: {0: 10, 1: 85, 2: 10, 4: 0}}, {T: {0: 60, 1: 90, 2: 40, 4: 85}}, {T: history})
    ranges = {s.partition: [(c.start, c.end, c.epoch) for c in s.checks] for s in pieces}
    assert ranges == {0: [(50, 80, 1)], 1: [(80, NO_END, 2)], 2: [], 4: [(80, NO_END, 2)]}
    assert pieces[0].checks[0].partitions == 6 and pieces[0].checks[0].earlier == (3,)
    assert slices({T: {0: 0}}, {T: {0: 60}}, {})[0].checks == (), "gate off: nothing is checked"


def test_available_now_target_reaches_every_threshold() -> None:
    history = expanded((6, {0: 50, 1: 50, 2: 50}))
    wm = marks(p0=(0, 40), p1=(0, 60), p2=(0, 60), p3=(0, 5), p4=(0, 5), p5=(0, 5), p6=(0, 0))
    assert available_now_target(wm, {T: history}) == {T: {0: 50, 1: 60, 2: 60, 3: 5, 4: 5, 5: 5}}
    # a target caps reading, and partitions outside it are not read
    capped = plan(
        {T: {0: 0, 1: 0}}, marks(p0=(0, 40), p1=(0, 40), p2=(0, 9)), None, target={T: {0: 30, 1: 40}}
    )
    assert capped.end == {T: {0: 30, 1: 40, 2: 0}}


def test_initial_offsets() -> None:
    wm = marks(p0=(3, 10), p1=(0, 7))
    assert initial_offsets("earliest", wm, {T: None}) == {T: {0: 3, 1: 0}}
    assert initial_offsets("latest", wm, {T: None}) == {T: {0: 10, 1: 7}}
    json_start = parse_options(
        {"kafka.bootstrap.servers": "b:9092", "subscribe": T, "startingOffsets": '{"orders": {"0": -1}}'}
    ).starting
    assert initial_offsets(json_start, wm, {T: None}) == {T: {0: 10, 1: 0}}


# -- a simulation: keyed producers through 3 -> 6 -> 8, batches with random limits ------------


def _simulate(gate: bool, seed: int) -> tuple[int, int]:
    """(order violations, batches containing one key from two partitions)."""
    rng = random.Random(seed)
    history = EpochHistory.initial(T, 3)
    log: dict[int, list[tuple[str, int]]] = defaultdict(list)  # partition -> [(key, seq)]
    seq: dict[str, int] = defaultdict(int)

    def produce(n: int) -> None:
        count = history.active.partitions
        for _ in range(n):
            key = f"k{rng.randrange(60)}"
            log[zlib.crc32(key.encode()) % count].append((key, seq[key]))
            seq[key] += 1

    produce(400)
    for target in (6, 8):
        history = history.begin_fence(target).publish(
            {p: len(log[p]) for p in range(history.active.partitions)}
        )
        produce(400)
    wm = {T: {p: Watermarks(0, len(log[p])) for p in range(8)}}
    start: Offsets = {T: {}}
    last_seen: dict[str, int] = {}
    violations = mixed = 0
    for _ in range(1000):
        result = plan_batch(
            start, wm, {T: history}, max_records=rng.randrange(20, 200), gate=gate, fail_on_data_loss=True
        )
        if result.end == start:
            break
        batch: dict[str, set[int]] = defaultdict(set)
        rows = [(log[p][o], p) for p, stop in result.end[T].items() for o in range(start[T].get(p, 0), stop)]
        for (key, _), p in rows:
            batch[key].add(p)
        mixed += sum(len(ps) > 1 for ps in batch.values())
        for (key, number), _ in sorted(rows, key=lambda r: r[0][1]):  # in a batch, order by seq is free
            if number < last_seen.get(key, -1):
                violations += 1
            last_seen[key] = max(last_seen.get(key, -1), number)
        start = result.end
    assert sum(start[T].values()) == sum(len(v) for v in log.values()), "everything is read"
    return violations, mixed


@pytest.mark.parametrize("seed", range(8))
def test_simulated_expansions_never_mix_a_key_across_partitions_in_a_batch(seed: int) -> None:
    violations, mixed = _simulate(gate=True, seed=seed)
    assert (violations, mixed) == (0, 0)


def test_simulation_without_the_gate_does_reorder() -> None:
    assert sum(sum(_simulate(gate=False, seed=s)) for s in range(8)) > 0


def test_segments_of_all_partitions_are_each_partitions_and_kept_per_history() -> None:
    history = expanded(
        (6, {0: 50, 1: 50, 2: 50}), (8, dict.fromkeys(range(6), 80)), (9, dict.fromkeys(range(8), 80))
    )
    every = all_epoch_segments(history, range(10))
    assert every == {p: epoch_segments(history, p) for p in range(10)}
    assert every[0] == ((0, 0), (50, 1), (80, 3))  # epoch 2 began where epoch 3 did: no record of it
    assert every[9] == ((0, 0),)  # in no epoch yet
    copy = history.model_copy(update={"epochs": history.epochs[:2]})  # another history object
    assert all_epoch_segments(copy, [0])[0] == ((0, 0), (50, 1))


def test_a_plan_keeps_the_gate_keeper_while_the_history_stays() -> None:
    history = expanded((6, {0: 50, 1: 50, 2: 50}))
    keepers: dict[str, GateKeeper] = {}
    mark = marks(p0=(0, 60), p1=(0, 60), p2=(0, 60), p3=(0, 5), p4=(0, 5), p5=(0, 5))
    first = plan_batch({T: {p: 0 for p in range(6)}}, mark, {T: history}, max_records=None, gate=True,
                       fail_on_data_loss=True, keepers=keepers)  # fmt: skip
    kept = keepers[T]
    again = plan_batch({T: {p: 0 for p in range(6)}}, mark, {T: history}, max_records=None, gate=True,
                       fail_on_data_loss=True, keepers=keepers)  # fmt: skip
    assert keepers[T] is kept and again == first
    assert first.end[T][3] == 0 and first.held  # partition 3's records wait for partition 0
    newer = history.model_copy()
    plan_batch({T: {p: 0 for p in range(6)}}, mark, {T: newer}, max_records=None, gate=True,
               fail_on_data_loss=True, keepers=keepers)  # fmt: skip
    assert keepers[T] is not kept and keepers[T].history is newer


def test_few_slices_each_get_a_task_and_many_are_packed_whole_balanced_and_alike_every_time() -> None:
    few = [Slice(T, p, 0, 10) for p in range(4)]
    assert pack(few, 8) == [(piece,) for piece in few]
    rng = random.Random(7)
    many = [Slice(T, p, 0, rng.randint(1, 1_000)) for p in range(1_024)]
    tasks = pack(many, 64)
    assert len(tasks) == 64
    # every slice in exactly one task, whole; within a task in partition order
    assert sorted((s for task in tasks for s in task), key=lambda s: s.partition) == many
    assert all(list(task) == sorted(task, key=lambda s: s.partition) for task in tasks)
    loads = [sum(s.end - s.start for s in task) for task in tasks]
    assert max(loads) - min(loads) <= 1_000  # within the largest slice of each other
    assert pack(list(reversed(many)), 64) == tasks  # a replayed batch runs the same tasks
