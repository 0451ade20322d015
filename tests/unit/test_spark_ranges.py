"""Subscriptions resolved against the broker's topics, offsets from timestamps, and a batch read
planned as the stream would read the same range; pure, without Kafka or Spark."""

from __future__ import annotations

import pytest

from ordo.epochs import EpochHistory
from ordo_spark.planning import Offsets, Watermarks, plan_batch, worth_a_batch
from ordo_spark.ranges import ending_offsets, offsets_at_times, plan_batch_read, timestamp_requests
from ordo_spark.subscription import Subscription

T = "orders"


def test_a_pattern_matches_whole_names_and_never_internal_topics() -> None:
    available = {"orders-eu": 2, "orders-us": 1, "orders-eu-dlq": 1, "__ordo_epochs": 1, "__orders-x": 1}
    assert Subscription(pattern="orders-[a-z]+").select(available) == {"orders-eu": (0, 1), "orders-us": (0,)}
    assert Subscription(pattern=".*").select({"__consumer_offsets": 50}) == {}


def test_subscribe_and_assign_need_what_they_name() -> None:
    assert Subscription(topics=(T,)).select({T: 3}) == {T: (0, 1, 2)}
    with pytest.raises(RuntimeError, match="'orders' \\(option subscribe\\) does not exist"):
        Subscription(topics=(T,)).select({})
    assert Subscription(assigned={T: (0, 2)}).select({T: 3}) == {T: (0, 2)}
    with pytest.raises(RuntimeError, match="assign names partitions \\[3\\] of 'orders', which has 3"):
        Subscription(assigned={T: (0, 3)}).select({T: 3})


def _marks(*ranges: tuple[int, int]) -> dict[str, dict[int, Watermarks]]:
    return {T: {p: Watermarks(*lh) for p, lh in enumerate(ranges)}}


def test_timestamps_resolve_to_offsets_or_fail_or_go_to_the_end() -> None:
    wm = _marks((0, 10), (0, 20))
    requests = timestamp_requests(500, wm, "startingTimestamp")
    assert requests == {T: {0: 500, 1: 500}}
    found = {T: {0: 4, 1: -1}}  # partition 1 has nothing at or after 500
    with pytest.raises(
        RuntimeError, match=r"orders-1 has no record .* startingOffsetsByTimestampStrategy=latest"
    ):
        offsets_at_times(requests, found, wm, when_none="error", option="startingTimestamp")
    assert offsets_at_times(requests, found, wm, when_none="latest", option="x") == {T: {0: 4, 1: 20}}
    with pytest.raises(RuntimeError, match="names partitions \\[5\\]"):
        timestamp_requests({T: {5: 1}}, wm, "startingOffsetsByTimestamp")


def test_ending_offsets_latest_per_partition_and_unknown() -> None:
    wm = _marks((0, 10), (0, 20))
    assert ending_offsets("latest", wm, {T: None}) == {T: {0: 10, 1: 20}}
    assert ending_offsets({T: {0: 4, 1: -1}}, wm, {T: None}) == {T: {0: 4, 1: 20}}
    with pytest.raises(RuntimeError, match="endingOffsets names orders-7"):
        ending_offsets({T: {7: 1}}, wm, {T: None})


def _doubled() -> tuple[EpochHistory, dict[str, dict[int, Watermarks]]]:
    """3 -> 6 at thresholds 100; old partitions at 150, new ones at 40."""
    history = EpochHistory.initial(T, 3).begin_fence(6).publish({0: 100, 1: 100, 2: 100})
    return history, _marks((0, 150), (0, 150), (0, 150), (0, 40), (0, 40), (0, 40))


def _stream_union(
    start: Offsets, end: Offsets, history: EpochHistory, wm: dict[str, dict[int, Watermarks]]
) -> Offsets:
    """Where the stream stands once it stops making progress towards ``end``."""
    position = start
    for _ in range(100):
        plan = plan_batch(
            position, wm, {T: history}, max_records=37, gate=True, fail_on_data_loss=True, target=end
        )
        if plan.end == position:
            return position
        position = plan.end
    raise AssertionError("the stream never settled")


def test_a_batch_read_is_the_streams_rounds_in_order() -> None:
    history, wm = _doubled()
    start = {T: {0: 50, 1: 50, 2: 50}}
    end = ending_offsets("latest", wm, {T: history})
    read = plan_batch_read(start, end, wm, {T: history}, gate=True, fail_on_data_loss=True)
    # round 1: the old partitions; round 2: the new ones, whose gates the first round opened
    assert [[(s.partition, s.start, s.end) for s in r] for r in read.rounds] == [
        [(0, 50, 150), (1, 50, 150), (2, 50, 150)],
        [(3, 0, 40), (4, 0, 40), (5, 0, 40)],
    ]
    assert read.rounds[0][0].epochs == ((0, 0), (100, 1))
    stream_end = _stream_union(start, end, history, wm)
    assert {s.partition: s.end for s in read.pieces} == stream_end[T], "exactly what the stream reads"
    ungated = plan_batch_read(start, end, wm, {T: history}, gate=False, fail_on_data_loss=True)
    assert len(ungated.rounds) == 1 and ungated.rounds[0][3].epochs == ()


def test_a_batch_read_that_would_leave_records_behind_a_gate_fails() -> None:
    history, wm = _doubled()
    end = {T: {0: 90, 1: 150, 2: 150, 3: 40, 4: 40, 5: 40}}  # partition 0 ends before its threshold
    with pytest.raises(
        RuntimeError, match=r"orders-3 cannot be read in order past offset 0.*partitions 0 to 100"
    ):
        plan_batch_read({T: {0: 0, 1: 0, 2: 0}}, end, wm, {T: history}, gate=True, fail_on_data_loss=True)
    ungated = plan_batch_read(
        {T: {0: 0, 1: 0, 2: 0}}, end, wm, {T: history}, gate=False, fail_on_data_loss=True
    )
    assert {s.partition: s.end for s in ungated.pieces} == end[T]


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        ({T: {0: 0}}, {T: {0: 11}}, "up to offset 11, but the partition ends at 10"),
        ({T: {0: 8}}, {T: {0: 5}}, "starts at offset 8, past its end 5"),
    ],
)
def test_a_batch_range_that_cannot_be_read_fails(start: Offsets, end: Offsets, message: str) -> None:
    with pytest.raises(RuntimeError, match=message):
        plan_batch_read(start, end, _marks((0, 10)), {T: None}, gate=True, fail_on_data_loss=True)


def test_min_offsets_per_trigger_waits_until_enough_or_the_delay() -> None:
    start, end = {T: {0: 10, 1: 0}}, {T: {0: 15, 1: 3}}  # 8 records
    assert worth_a_batch(start, end, None, 0, 1000)
    assert worth_a_batch(start, end, 10, None, 1000), "the first batch always runs"
    assert not worth_a_batch(start, end, 10, 999, 1000)
    assert worth_a_batch(start, end, 10, 1000, 1000), "maxTriggerDelay passed"
    assert worth_a_batch(start, end, 8, 0, 1000)
