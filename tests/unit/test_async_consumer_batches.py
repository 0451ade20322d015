"""AsyncConsumer's bookkeeping by batch (issue 23): offsets added and done in runs, the scheduler's
runs, the fetcher's handoff, and the poll's wake-ups, without a broker."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Message
from hypothesis import given
from hypothesis import strategies as st

from ordo.async_consumer import AsyncConsumer
from ordo.async_consumer import consumer as consumer_module
from ordo.async_consumer.consumer import _Owned
from ordo.async_consumer.handoff import Handoff
from ordo.async_consumer.offsets import OffsetTracker
from ordo.async_consumer.scheduler import Scheduler

# -- OffsetTracker in runs ---------------------------------------------------------------------


@given(
    st.lists(st.integers(1, 3), min_size=1, max_size=80),
    st.integers(1, 12),
    st.randoms(use_true_random=False),
)
def test_runs_done_in_any_order_never_pass_an_unfinished_record(
    gaps: list[int], chunk: int, rnd: random.Random
) -> None:
    offsets = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    t = OffsetTracker()
    t.add_many(offsets[: len(offsets) // 2])
    t.add_many(offsets[len(offsets) // 2 :])
    order = offsets[:]
    rnd.shuffle(order)
    finished: set[int] = set()
    for i in range(0, len(order), chunk):
        part = order[i : i + chunk]
        t.done_many(part)
        finished.update(part)
        expected = next((x for x in offsets if x not in finished), offsets[-1] + 1)
        assert t.position == expected
        assert t.unfinished == len(offsets) - len(finished)


def test_a_run_must_increase_past_what_was_added() -> None:
    t = OffsetTracker()
    t.add_many([3, 4, 6])
    with pytest.raises(ValueError, match="must increase"):
        t.add_many([6, 7])
    with pytest.raises(ValueError, match="must increase"):
        t.add_many([8, 10, 9])
    t.add_many([])
    assert t.position == 3 and t.unfinished == 3


def test_unknown_offsets_in_a_run_are_ignored() -> None:
    t = OffsetTracker()
    t.add_many([10, 11, 12])
    assert not t.done_many([1, 11, 99])
    assert t.unfinished == 2 and t.position == 10
    assert t.done_many([10])
    assert t.position == 12


# -- Scheduler runs ----------------------------------------------------------------------------


def test_runs_keep_each_partitions_order_and_the_limit() -> None:
    s: Scheduler[str, int] = Scheduler("unordered")
    s.add_many("p0", list(range(10)))
    s.add_many("p1", list(range(100, 110)))
    s.add("p0", None, 10)
    runs = s.take_runs(8)
    assert sum(len(run) for _, run in runs) == 8
    assert {p for p, _ in runs} == {"p0", "p1"}  # a fair share each, not one partition first
    rest = s.take_runs(100)
    by_partition: dict[str, list[int]] = {}
    for partition, run in runs + rest:
        by_partition.setdefault(partition, []).extend(run)
    assert by_partition == {"p0": list(range(11)), "p1": list(range(100, 110))}
    assert s.total == 0 and s.buffered("p0") == 0


def test_partition_mode_runs_are_one_record_until_released() -> None:
    s: Scheduler[str, int] = Scheduler("partition")
    s.add_many("p0", [1, 2, 3])
    assert s.take_runs(100) == [("p0", [1])]
    assert s.take_runs(100) == []
    s.release("p0", None)
    assert s.take_runs(100) == [("p0", [2])]


def test_key_mode_takes_records_one_by_one_with_their_keys() -> None:
    s: Scheduler[str, int] = Scheduler("key")
    with pytest.raises(ValueError, match="key"):
        s.add_many("p0", [1, 2])


# -- Handoff -----------------------------------------------------------------------------------


def test_handoff_gives_every_batch_once_in_order_while_another_thread_puts() -> None:
    handoff: Handoff[int] = Handoff()
    batches = [list(range(i * 10, i * 10 + 10)) for i in range(2_000)]

    def put_all() -> None:
        for batch in batches:
            handoff.put(batch)

    putter = threading.Thread(target=put_all)
    putter.start()
    taken: list[int] = []
    deadline = time.monotonic() + 30
    while len(taken) < 20_000 and time.monotonic() < deadline:
        assert 0 <= len(handoff) <= 20_000 - len(taken)
        for batch in handoff.take():
            taken.extend(batch)
    putter.join()
    assert taken == list(range(20_000))
    assert len(handoff) == 0 and not handoff


# -- the poll's wake-ups, without a broker -----------------------------------------------------

TOPIC = "t"


@contextmanager
def _offline(**options: int) -> Iterator[AsyncConsumer]:
    """An AsyncConsumer whose fetcher finds no broker: the test hands it batches as the fetcher
    would, for partitions it pretends to own."""
    config = {
        "bootstrap.servers": "127.0.0.1:9",
        "group.id": "g",
        "error_cb": lambda error: None,
        "log_level": 0,
    }
    consumer = AsyncConsumer(config, [TOPIC], ordering="unordered", **options)  # type: ignore[arg-type]
    with consumer._lock:
        consumer._owned[(TOPIC, 0)] = _Owned()
    try:
        yield consumer
    finally:
        with consumer._lock:  # nothing to wait for or to commit (there is no broker)
            consumer._in_flight.clear()
            consumer._owned.clear()
        consumer.close(5)


def _records(first: int, count: int) -> list[Message]:
    return [Message(topic=TOPIC, partition=0, offset=o, value=b"v") for o in range(first, first + count)]


def _until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)  # polling a condition, not synchronising on time
    return True


def _poll_in_thread(consumer: AsyncConsumer, timeout: float) -> tuple[threading.Thread, list[list[Message]]]:
    out: list[list[Message]] = []
    thread = threading.Thread(target=lambda: out.append(consumer.poll(timeout, 100).records))
    thread.start()
    assert _until(lambda: consumer._poll_waiting)
    return thread, out


def test_a_poll_waiting_for_room_wakes_when_records_come_after_the_room() -> None:
    with _offline(max_in_flight=10) as consumer:
        consumer._hand_over(_records(0, 10))
        first = consumer.poll(0, 100).records
        assert len(first) == 10 and consumer.in_flight == 10
        thread, out = _poll_in_thread(consumer, 20)
        started = time.monotonic()
        consumer.done_many(first)  # room, but nothing buffered: the poll keeps waiting
        consumer._hand_over(_records(10, 5))  # now it can hand out
        thread.join(10)
        assert not thread.is_alive() and [m.offset() for m in out[0]] == list(range(10, 15))
        assert time.monotonic() - started < 10  # woken, not timed out
        assert consumer._owned[(TOPIC, 0)].tracker.position == 10


def test_done_many_settles_on_the_workers_thread_when_the_lock_is_free() -> None:
    with _offline(max_in_flight=100) as consumer:
        consumer._hand_over(_records(0, 50))
        records = consumer.poll(0, 100).records
        consumer.done_many(records[:20])
        assert not consumer._done  # settled by done_many itself: a woken poll only hands out
        assert consumer._owned[(TOPIC, 0)].tracker.position == 20
        with consumer._lock:  # held (by poll or the fetcher): done_many only queues
            consumer.done_many(records[20:])
            assert len(consumer._done) == 30
        assert consumer.unfinished() == set()
        assert consumer._owned[(TOPIC, 0)].tracker.position == 50


# -- pacing the unordered poll's wake-ups ------------------------------------------------------


def test_a_slow_pool_wakes_the_poll_for_smaller_batches_and_a_fast_one_for_a_quarter() -> None:
    """Workers finishing 3,000 records/s: the poll is woken once about WAKE_EVERY's worth (60) is
    done, no fewer than a sixteenth of max_in_flight; 100,000/s: a quarter, as before pacing."""
    from ordo.async_consumer.consumer import WAKE_EVERY

    with _offline(max_in_flight=1_000) as consumer:
        assert consumer._wake_at == 750  # until a rate is known
        window = 5 * WAKE_EVERY

        def pace(per_second: int) -> tuple[int, int]:
            """_pace after a window of handing ``per_second``: the room it chose, and what the
            workers finish in WAKE_EVERY at the rate over the window as it really ran (it runs on
            past ``window`` by however long the machine takes between the two clock reads)."""
            since = time.monotonic() - window
            consumer._handed_since = since
            handed = int(per_second * window)
            consumer._pace(handed)
            ran = consumer._handed_since - since  # _pace's now: the window it measured
            assert ran >= window
            return 1_000 - consumer._wake_at, int(handed / ran * WAKE_EVERY)

        room, _ = pace(3_000)
        assert room == 62  # 3,000/s x 20 ms = 60 or fewer, below a sixteenth (62)
        room, paced = pace(100_000)
        assert room == min(250, max(62, paced))  # 2,000: a quarter (250), unless the window ran on 8x
        room, paced = pace(8_000)
        assert room == max(62, paced) and paced <= 160  # 8,000/s x 20 ms, less as the window ran on


def test_one_quick_poll_alone_does_not_change_the_pace() -> None:
    with _offline(max_in_flight=1_000) as consumer:
        consumer._handed_since = time.monotonic()
        consumer._pace(10)  # 10 records within a few microseconds: no rate yet
        assert consumer._wake_at == 750


def test_a_full_buffer_holds_the_fetcher_before_it_pauses_every_partition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pause drops librdkafka's prefetched records and its resume waits out a long-poll: a full
    buffer first holds the fetcher for PAUSE_AFTER, and pauses only if nothing drained it."""
    # longer than the offline fetcher's loop (a 50 ms consume): pausing at once would show
    monkeypatch.setattr(consumer_module, "PAUSE_AFTER", 0.5)
    with _offline(max_buffered=100) as consumer:
        full_at = time.monotonic()  # before the handover: the fetcher may see it full at once
        consumer._hand_over(_records(0, 100))
        assert _until(lambda: consumer._owned[(TOPIC, 0)].paused)
        assert time.monotonic() - full_at >= 0.5
        records = consumer.poll(0, 100).records  # drained: resumed below three quarters
        consumer.done_many(records)
        assert _until(lambda: not consumer._owned[(TOPIC, 0)].paused)
        assert [m.offset() for m in records] == list(range(100))
