"""AsyncConsumer in its steady state (no rebalance) vs a raw Consumer + the same thread pool written
the obvious way, side by side: records/s from the first record handed out to the last one done,
and the process's CPU microseconds per record over the same window, with no work and with 1 ms of
(sleeping) work per record on 4 workers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import Consumer, Message

from ordo.async_consumer import AsyncConsumer

from ._result import Result, Stopwatch
from ._testbed import kafka_bootstrap
from .async_consumer_bench import MAX_IN_FLIGHT, WORK, WORKERS, _fill, _Log, _work

ROUNDS = 5
CASES = (("1 ms/record", WORK, 20_000), ("no work", 0.0, 60_000))  # (label, work s, records)
Sample = tuple[float, float]  # (records/s, CPU µs/record)


def _async(config: dict[str, str], topic: str, work: float, records: int) -> Sample:
    log = _Log("async")
    counted = threading.Semaphore(0)
    pool = ThreadPoolExecutor(WORKERS)
    consumer = AsyncConsumer(config, [topic], ordering="unordered", max_in_flight=MAX_IN_FLIGHT)

    def task(message: Message) -> None:
        _work(message, log, work)
        consumer.done(message)
        counted.release()

    clock: Stopwatch | None = None
    handed = 0
    while handed < records:
        batch = consumer.poll(0.1)
        if clock is None and batch.records:
            clock = Stopwatch()
        for record in batch.records:
            pool.submit(task, record)
        handed += len(batch.records)
    for _ in range(records):
        counted.acquire()
    assert clock is not None
    sample = clock.rate(records), clock.cpu_us(records)
    consumer.close()
    pool.shutdown()
    return sample


def _raw(config: dict[str, str], topic: str, work: float, records: int) -> Sample:
    log = _Log("raw")
    counted = threading.Semaphore(0)
    pool = ThreadPoolExecutor(WORKERS)
    raw = Consumer({**config, "enable.auto.offset.store": False})
    raw.subscribe([topic])
    room = threading.BoundedSemaphore(MAX_IN_FLIGHT)

    def task(message: Message) -> None:
        _work(message, log, work)
        raw.store_offsets(message=message)
        room.release()
        counted.release()

    clock: Stopwatch | None = None
    handed = 0
    while handed < records:
        for message in raw.consume(1000, 0.1):
            if message.error() is not None:
                continue
            if clock is None:
                clock = Stopwatch()
            room.acquire()
            pool.submit(task, message)
            handed += 1
    for _ in range(records):
        counted.acquire()
    assert clock is not None
    sample = clock.rate(records), clock.cpu_us(records)
    raw.close()
    pool.shutdown()
    return sample


SIDES: dict[str, Callable[[dict[str, str], str, float, int], Sample]] = {"async": _async, "raw": _raw}


def _steady(bootstrap: str, kind: str, work: float, records: int) -> Sample:
    """One run of one side over ``records`` prefilled records with ``work`` s per record."""
    topic = f"steady-{kind}-{time.monotonic_ns()}"
    _fill(bootstrap, topic, records)
    config = {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    return SIDES[kind](config, topic, work, records)


def _rounds(bootstrap: str, work: float, records: int) -> dict[str, list[Sample]]:
    """Each round one run of each side, the side that goes first alternating."""
    samples: dict[str, list[Sample]] = {"async": [], "raw": []}
    for round_ in range(ROUNDS):
        for kind in ("async", "raw") if round_ % 2 else ("raw", "async"):
            samples[kind].append(_steady(bootstrap, kind, work, records))
    return samples


def run() -> list[Result]:
    results = []
    with kafka_bootstrap() as bootstrap:
        for label, work, records in CASES:
            samples = _rounds(bootstrap, work, records)
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
                    ">= 0.9" if work == 0 else ">= 0.95",
                    ([cpu for _, cpu in ours], [cpu for _, cpu in raw]),
                )
            )
    return results
