"""AsyncConsumer in its steady state (no rebalance) vs a raw Consumer + the same thread pool written
the obvious way, side by side: records/s from the first record handed out to the last one done,
and the process's CPU microseconds per record over the same window, with no work and with 1 ms of
(sleeping) work per record on 4 workers, a pool task per record; and with no work in tasks of 100
records (``done_many`` per task; the raw side stores the task's offsets in one call), where the
pool's own cost per task (a Future, its lock) no longer hides the consumers', at Python's switch
interval and at 0.5 ms (docs/performance.md: the AsyncConsumer's extra thread costs handoffs)."""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import Consumer, Message, TopicPartition

from ordo._clients import FETCH_QUEUE_BACKOFF_MS
from ordo.async_consumer import AsyncConsumer

from ._result import Result, Stopwatch
from ._testbed import kafka_bootstrap
from .async_consumer_bench import MAX_IN_FLIGHT, WORK, WORKERS, _fill, _Log, _work

ROUNDS = 5
# (label, work s per record, records, records per task: 1 is a task and a done() per record,
# the interpreter's switch interval: how long a thread that wants the GIL may wait, Python's
# default 5 ms; a shorter one shows what the AsyncConsumer's extra thread costs in handoffs)
CASES = (
    ("1 ms/record", WORK, 20_000, 1, 0.005),
    ("no work", 0.0, 100_000, 1, 0.005),
    ("no work, tasks of 100 records (done_many)", 0.0, 150_000, 100, 0.005),
    ("no work, tasks of 100 records (done_many), switch interval 0.5 ms", 0.0, 150_000, 100, 0.0005),
)
Sample = tuple[float, float]  # (records/s, CPU µs/record)


def _chunks(records: list[Message], size: int) -> list[list[Message]]:
    return [records[i : i + size] for i in range(0, len(records), size)]


def _hand_out(
    pool: ThreadPoolExecutor,
    messages: list[Message],
    chunk: int,
    task: Callable[[Message], None],
    chunk_task: Callable[[list[Message]], None],
    room: threading.BoundedSemaphore | None = None,
) -> None:
    """Submit a task per record (``chunk`` 1) or per ``chunk`` records; ``room``: a slot per task
    (the raw side's bound on records in flight, which the AsyncConsumer keeps itself)."""
    if chunk == 1:
        for message in messages:
            if room is not None:
                room.acquire()
            pool.submit(task, message)
    else:
        for part in _chunks(messages, chunk):
            if room is not None:
                room.acquire()
            pool.submit(chunk_task, part)


def _finish(counted: threading.Semaphore, records: int, clock: Stopwatch | None) -> Sample:
    """Wait until every record is done; the rate and CPU per record since the first was handed out."""
    for _ in range(records):
        counted.acquire()
    assert clock is not None
    return clock.rate(records), clock.cpu_us(records)


def _async(config: dict[str, Any], topic: str, work: float, records: int, chunk: int) -> Sample:
    log = _Log("async")
    counted = threading.Semaphore(0)
    pool = ThreadPoolExecutor(WORKERS)
    consumer = AsyncConsumer(config, [topic], ordering="unordered", max_in_flight=MAX_IN_FLIGHT)

    def task(message: Message) -> None:
        _work(message, log, work)
        consumer.done(message)
        counted.release()

    def chunk_task(messages: list[Message]) -> None:
        for message in messages:
            _work(message, log, work)
        consumer.done_many(messages)
        counted.release(len(messages))

    clock: Stopwatch | None = None
    handed = 0
    while handed < records:
        batch = consumer.poll(0.1)
        if clock is None and batch.records:
            clock = Stopwatch()
        _hand_out(pool, batch.records, chunk, task, chunk_task)
        handed += len(batch.records)
    sample = _finish(counted, records, clock)
    consumer.close()
    pool.shutdown()
    return sample


def _raw(config: dict[str, Any], topic: str, work: float, records: int, chunk: int) -> Sample:
    log = _Log("raw")
    counted = threading.Semaphore(0)
    pool = ThreadPoolExecutor(WORKERS)
    raw = Consumer({**config, "enable.auto.offset.store": False})
    raw.subscribe([topic])
    room = threading.BoundedSemaphore(MAX_IN_FLIGHT // chunk)  # one slot per task

    def task(message: Message) -> None:
        _work(message, log, work)
        raw.store_offsets(message=message)
        room.release()
        counted.release()

    def chunk_task(messages: list[Message]) -> None:
        for message in messages:
            _work(message, log, work)
        raw.store_offsets(offsets=[TopicPartition(m.topic() or "", m.partition() or 0, (m.offset() or 0) + 1)
                                   for m in messages])  # fmt: skip
        room.release()
        counted.release(len(messages))

    clock: Stopwatch | None = None
    handed = 0
    while handed < records:
        messages = [m for m in raw.consume(1000, 0.1) if m.error() is None]
        if clock is None and messages:
            clock = Stopwatch()
        _hand_out(pool, messages, chunk, task, chunk_task, room)
        handed += len(messages)
    sample = _finish(counted, records, clock)
    raw.close()
    pool.shutdown()
    return sample


SIDES: dict[str, Callable[[dict[str, Any], str, float, int, int], Sample]] = {"async": _async, "raw": _raw}


def _steady(bootstrap: str, kind: str, work: float, records: int, chunk: int) -> Sample:
    """One run of one side over ``records`` prefilled records with ``work`` s per record."""
    topic = f"steady-{kind}-{time.monotonic_ns()}"
    _fill(bootstrap, topic, records)
    # the raw side refills its local queue as soon as the AsyncConsumer does (ordo._clients.fast_refill)
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": f"g-{topic}",
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
    }
    # each side starts from a collected heap: the previous run's garbage (a Future and its locks
    # per record) would otherwise fall into this run's full collections (50-300 ms each here)
    gc.collect()
    return SIDES[kind](config, topic, work, records, chunk)


def _rounds(bootstrap: str, work: float, records: int, chunk: int) -> dict[str, list[Sample]]:
    """Each round one run of each side, the side that goes first alternating."""
    samples: dict[str, list[Sample]] = {"async": [], "raw": []}
    for round_ in range(ROUNDS):
        for kind in ("async", "raw") if round_ % 2 else ("raw", "async"):
            samples[kind].append(_steady(bootstrap, kind, work, records, chunk))
    return samples


def run() -> list[Result]:
    results = []
    with kafka_bootstrap() as bootstrap:
        for label, work, records, chunk, switch in CASES:
            default = sys.getswitchinterval()
            sys.setswitchinterval(switch)
            try:
                samples = _rounds(bootstrap, work, records, chunk)
            finally:
                sys.setswitchinterval(default)
            ours, raw = samples["async"], samples["raw"]
            rounds = zip(ours, raw, strict=True)
            shown = ", ".join(f"{a:,.0f}/{r:,.0f} {ac:.1f}/{rc:.1f}" for (a, ac), (r, rc) in rounds)
            print(f"  {label}, per round (async / raw rec/s, CPU µs/record): {shown}")
            results.append(
                Result.paired(
                    f"steady state, {label}, {WORKERS} workers: AsyncConsumer vs raw Consumer + pool",
                    [rate for rate, _ in ours],
                    [rate for rate, _ in raw],
                    "rec/s",
                    ">= 0.95" if work else ">= 0.9" if chunk == 1 else "",
                    ([cpu for _, cpu in ours], [cpu for _, cpu in raw]),
                )
            )
    return results
