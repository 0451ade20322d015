"""AsyncConsumer in its steady state (no rebalance) vs a raw Consumer + the same thread pool written
the obvious way, side by side: records/s and the process's CPU microseconds per record, with no
work and with 1 ms of (sleeping) work per record on 4 workers, a pool task per record; and with
no work in tasks of 100 records (``done_many`` per task; the raw side stores the task's offsets in
one call), where the pool's own cost per task (a Future, its lock) no longer hides the consumers',
at Python's switch interval and at 0.5 ms (docs/performance.md: the AsyncConsumer's extra thread
costs handoffs).

Both sides live through a case's rounds, each with its own topic and pool, and take turns in
blocks of a fraction of a second (``alternate``): a block hands out its records and waits until
every one is done. As whole runs of 100,000 records a side, rounds with no work spread 0.48-1.16:
a run met other moments of the shared machine than the other side's. While one side runs, the
other's consumer fetches ahead (the AsyncConsumer's fetcher up to ``max_buffered``, librdkafka's
queue up to ``queued.min.messages``): a warm-up block pair, uncounted, fills both first, so each
counted block fetches what it hands out.

The harness's heap is frozen (``gc.freeze()`` after a collection), as docs/performance.md advises
an application doing little work per record: a full collection walks every object alive, the
benchmark's own imports included (matplotlib, the verifier: 75,000 objects, 50-60 ms a walk
here), and where those walks fell decided a round's ratio. One row runs unfrozen, to show what an
application that does not freeze pays."""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from confluent_kafka import Consumer, Message, TopicPartition

from ordo.async_consumer import AsyncConsumer
from ordo.client_config import FETCH_QUEUE_BACKOFF_MS

from ._result import Result, alternate, per_record
from ._testbed import kafka_bootstrap
from .async_consumer_bench import MAX_IN_FLIGHT, WORK, WORKERS, _fill, _Log, _work

ROUNDS = 5
BLOCKS = 10  # blocks per side per round


class Case(NamedTuple):
    label: str
    work: float  # seconds per record
    block: int  # records per block: a fraction of a second
    chunk: int  # records per task: 1 is a task and a done() per record
    # the interpreter's switch interval: how long a thread that wants the GIL may wait, Python's
    # default 5 ms; a shorter one shows what the AsyncConsumer's extra thread costs in handoffs
    switch: float = 0.005
    frozen: bool = True  # the harness's heap frozen through the case
    target: str = ""


CASES = (
    Case("1 ms/record", WORK, 1_000, 1, target=">= 0.95"),
    Case("no work", 0.0, 10_000, 1, target=">= 0.9"),
    Case("no work, heap not frozen", 0.0, 10_000, 1, frozen=False),
    Case("no work, tasks of 100 records (done_many)", 0.0, 30_000, 100),
    Case("no work, tasks of 100 records (done_many), switch interval 0.5 ms", 0.0, 30_000, 100, 0.0005),
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


class _Side:
    """One side of a case: its consumer, its pool, and ``block``: hand out ``records`` records and
    wait until every one is done."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.pool = ThreadPoolExecutor(WORKERS)
        self.counted = threading.Semaphore(0)
        # the raw side's bound on tasks in flight (a slot per task); the AsyncConsumer keeps its own
        self.room: threading.BoundedSemaphore | None = None

    def block(self, records: int) -> None:
        handed = 0
        while handed < records:
            messages = self.fetch(min(1_000, records - handed))
            _hand_out(self.pool, messages, self.case.chunk, self.task, self.chunk_task, self.room)
            handed += len(messages)
        for _ in range(records):
            self.counted.acquire()

    def fetch(self, most: int) -> list[Message]:
        raise NotImplementedError

    def task(self, message: Message) -> None:
        raise NotImplementedError

    def chunk_task(self, messages: list[Message]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.pool.shutdown()


class _Async(_Side):
    def __init__(self, case: Case, config: dict[str, Any], topic: str) -> None:
        super().__init__(case)
        self.log = _Log("async")
        self.consumer = AsyncConsumer(config, [topic], ordering="unordered", max_in_flight=MAX_IN_FLIGHT)

    def fetch(self, most: int) -> list[Message]:
        return self.consumer.poll(0.1, max_records=most).records

    def task(self, message: Message) -> None:
        _work(message, self.log, self.case.work)
        self.consumer.done(message)
        self.counted.release()

    def chunk_task(self, messages: list[Message]) -> None:
        for message in messages:
            _work(message, self.log, self.case.work)
        self.consumer.done_many(messages)
        self.counted.release(len(messages))

    def close(self) -> None:
        self.consumer.close()
        super().close()


class _Raw(_Side):
    def __init__(self, case: Case, config: dict[str, Any], topic: str) -> None:
        super().__init__(case)
        self.log = _Log("raw")
        self.consumer = Consumer({**config, "enable.auto.offset.store": False})
        self.consumer.subscribe([topic])
        self.room: threading.BoundedSemaphore = threading.BoundedSemaphore(MAX_IN_FLIGHT // case.chunk)

    def fetch(self, most: int) -> list[Message]:
        return [m for m in self.consumer.consume(most, 0.1) if m.error() is None]

    def task(self, message: Message) -> None:
        _work(message, self.log, self.case.work)
        self.consumer.store_offsets(message=message)
        self.room.release()
        self.counted.release()

    def chunk_task(self, messages: list[Message]) -> None:
        for message in messages:
            _work(message, self.log, self.case.work)
        after = [TopicPartition(m.topic() or "", m.partition() or 0, (m.offset() or 0) + 1) for m in messages]
        self.consumer.store_offsets(offsets=after)
        self.room.release()
        self.counted.release(len(messages))

    def close(self) -> None:
        self.consumer.close()
        super().close()


def _sides(bootstrap: str, case: Case) -> dict[str, _Side]:
    """Both sides, each on its own topic filled for the warm-up and every counted block."""
    records = case.block * (1 + ROUNDS * BLOCKS)
    sides: dict[str, _Side] = {}
    for name, side in (("async", _Async), ("raw", _Raw)):
        topic = f"steady-{name}-{time.monotonic_ns()}"
        _fill(bootstrap, topic, records)
        # the raw side refills its local queue as soon as the AsyncConsumer does
        # (ordo.client_config.FETCH_QUEUE_BACKOFF_MS)
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        }
        sides[name] = side(case, config, topic)
    return sides


def _rounds(bootstrap: str, case: Case) -> dict[str, list[Sample]]:
    """A warm-up block of each side, then ROUNDS rounds of BLOCKS blocks each, in turn."""
    sides = _sides(bootstrap, case)
    samples: dict[str, list[Sample]] = {"async": [], "raw": []}
    try:
        for side in sides.values():
            side.block(case.block)
        gc.collect()
        if case.frozen:
            gc.freeze()
        blocks = {name: (lambda _, side=side: side.block(case.block)) for name, side in sides.items()}
        for round_ in range(ROUNDS):
            spent = alternate(BLOCKS, blocks, round_ % 2 == 0)
            for name, took in spent.items():
                samples[name].append(per_record(took, BLOCKS * case.block))
    finally:
        gc.unfreeze()
        for side in sides.values():
            side.close()
    return samples


def run() -> list[Result]:
    results = []
    with kafka_bootstrap() as bootstrap:
        for case in CASES:
            default = sys.getswitchinterval()
            sys.setswitchinterval(case.switch)
            try:
                samples = _rounds(bootstrap, case)
            finally:
                sys.setswitchinterval(default)
            ours, raw = samples["async"], samples["raw"]
            rounds = zip(ours, raw, strict=True)
            shown = ", ".join(f"{a:,.0f}/{r:,.0f} {ac:.1f}/{rc:.1f}" for (a, ac), (r, rc) in rounds)
            print(f"  {case.label}, per round (async / raw rec/s, CPU µs/record): {shown}")
            results.append(
                Result.paired(
                    f"steady state, {case.label}, {WORKERS} workers: AsyncConsumer vs raw Consumer + pool",
                    [rate for rate, _ in ours],
                    [rate for rate, _ in raw],
                    "rec/s",
                    case.target,
                    ([cpu for _, cpu in ours], [cpu for _, cpu in raw]),
                )
            )
    return results
