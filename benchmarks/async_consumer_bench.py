"""AsyncConsumer (KIP-983), measured side by side on the testbed:

- rebalance: 6 partitions, 1 ms of work per record on 4 workers; a second consumer joins and the
  first must release 3 partitions, whose state takes ~3 s to flush. Throughput of the first consumer
  on the partitions it keeps, during the revocation, as a fraction of its steady state before:
  AsyncConsumer (flushes aside, ``delay_revoke`` meanwhile) vs a naive consumer that flushes inside
  ``on_revoke``. Both timelines go to ``benchmarks/async_consumer_rebalance.png``;
- the same for several buffer sizes (how large ``max_buffered`` must be);
- duplicates after the rebalance (records processed twice, counted by the independent verifier);
- steady state: AsyncConsumer vs a raw Consumer + thread pool written the obvious way.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ordo.async_consumer import TP, AsyncConsumer
from ordo.group_protocol import CLASSIC, CONSUMER, with_classic_defaults
from ordo_sandbox.scenario.records import Numbered, decode, encode, key_name
from ordo_sandbox.scenario.verify import verify

from ._result import Result
from ._testbed import kafka_bootstrap

PARTITIONS = 6
WORKERS = 4
WORK = 0.001  # seconds of (sleeping) work per record
FLUSH = 3.0  # seconds a revoked partition's state takes to flush
MAX_IN_FLIGHT = 1_000
BUFFER_SIZES = (5_000, 10_000, 20_000, 40_000)
CHOSEN_BUFFER = 40_000
REBALANCE_RECORDS = 150_000
PNG = Path(__file__).parent / "async_consumer_rebalance.png"


def _fill(bootstrap: str, topic: str, records: int, keys: int = 600) -> dict[str, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result arrives
    admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    delivered: dict[str, int] = {}
    for i in range(records):
        key = key_name(0, i % keys)
        seq = delivered.get(key, 0)
        delivered[key] = seq + 1
        value = encode(Numbered(key, seq)).ljust(100, b" ")
        while True:
            try:
                producer.produce(topic, value, key.encode())
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    return delivered


@dataclass
class _Log:
    """What one consumer processed: (monotonic ns, partition, offset, value), in processing order."""

    name: str
    rows: list[tuple[int, int, int, bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, message: Message) -> None:
        row = (time.monotonic_ns(), message.partition() or 0, message.offset() or 0, message.value() or b"")
        with self.lock:
            self.rows.append(row)

    def write(self, folder: Path) -> Path:
        path = folder / f"{self.name}.log"
        lines = []
        for at, partition, offset, value in self.rows:
            record = decode(value)
            lines.append(f"{at} {record.key} {record.seq} {partition} {offset}")
        path.write_text("\n".join(lines) + "\n")
        return path


def _work(message: Message, log: _Log, work: float) -> None:
    if work:
        time.sleep(work)
    log.note(message)


class _App:
    """A consuming application on a thread of its own: what it processed (``log``), when its first
    revocation started and completed, and which partitions it gave up."""

    def __init__(self, config: dict[str, Any], topic: str, name: str, work: float) -> None:
        self.log = _Log(name)
        self.revoke_window: tuple[float, float] | None = None
        self.revoked: set[TP] = set()
        self.buffer_at_revoke = -1
        self._config, self._topic, self._work = config, topic, work
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name)
        self._lock = threading.Condition()
        self._owned: set[TP] = set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def owned(self) -> set[TP]:
        with self._lock:
            return set(self._owned)

    def _run(self) -> None:
        raise NotImplementedError


class _AsyncApp(_App):
    """The KIP-983 loop: hand records to the pool; on ``to_be_revoked`` flush those partitions'
    state aside and delay the revocation until the flush and their records are done."""

    def __init__(self, config: dict[str, Any], topic: str, name: str, max_buffered: int, work: float) -> None:
        super().__init__(config, topic, name, work)
        self._max_buffered = max_buffered

    def _run(self) -> None:
        consumer = AsyncConsumer(
            self._config,
            [self._topic],
            ordering="key",
            max_in_flight=MAX_IN_FLIGHT,
            max_buffered=self._max_buffered,
        )
        pool = ThreadPoolExecutor(WORKERS)
        flusher = ThreadPoolExecutor(PARTITIONS)
        flushes: dict[TP, Future[None]] = {}
        log, work = self.log, self._work

        def task(message: Message) -> None:
            _work(message, log, work)
            consumer.done(message)

        started: float | None = None
        try:
            while not self._stop.is_set():
                batch = consumer.poll(0.05)
                for record in batch.records:
                    pool.submit(task, record)
                for tp in batch.to_be_revoked:
                    if tp not in flushes:
                        flushes[tp] = flusher.submit(time.sleep, FLUSH)
                        self.revoked.add(tp)
                        if started is None:
                            started = time.monotonic()
                            self.buffer_at_revoke = consumer.buffered
                hold = {tp for tp in batch.to_be_revoked if not flushes[tp].done()}
                hold |= consumer.unfinished(batch.to_be_revoked)
                if hold:
                    consumer.delay_revoke(hold)
                with self._lock:
                    self._owned = consumer.assignment()
                if started is not None and self.revoke_window is None and not self._owned & self.revoked:
                    self.revoke_window = (started, time.monotonic())
        finally:
            consumer.close()
            pool.shutdown()
            flusher.shutdown()


class _NaiveApp(_App):
    """The usual loop: hand records to the pool; ``on_revoke`` waits for the revoked partitions'
    records, flushes their state and commits, blocking the poll loop meanwhile."""

    def __init__(self, config: dict[str, Any], topic: str, name: str, work: float) -> None:
        super().__init__(config, topic, name, work)
        self._in_flight: dict[TP, set[int]] = {}
        self._next: dict[TP, int] = {}

    def _positions(self, tps: set[TP] | None = None) -> list[TopicPartition]:
        with self._lock:
            out = []
            for tp, top in self._next.items():
                if tps is None or tp in tps:
                    flying = self._in_flight.get(tp)
                    out.append(TopicPartition(tp[0], tp[1], min(flying) if flying else top))
            return out

    def _run(self) -> None:
        consumer = Consumer({**self._config, "enable.auto.commit": False})
        pool = ThreadPoolExecutor(WORKERS)
        room = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        log, work = self.log, self._work

        def task(message: Message, tp: TP) -> None:
            _work(message, log, work)
            with self._lock:
                self._in_flight[tp].discard(message.offset() or 0)
                self._lock.notify_all()
            room.release()

        def on_assign(_c: Consumer, partitions: list[TopicPartition]) -> None:
            with self._lock:
                self._owned |= {(p.topic, p.partition) for p in partitions}

        def on_revoke(c: Consumer, partitions: list[TopicPartition]) -> None:
            tps = {(p.topic, p.partition) for p in partitions}
            started = time.monotonic()
            self.revoked |= tps
            with self._lock:
                self._lock.wait_for(lambda: not any(self._in_flight.get(tp) for tp in tps), 60)
            time.sleep(FLUSH)  # the revoked partitions' state is flushed: the application's work
            offsets = [tp for tp in self._positions(tps) if tp.offset >= 0]
            if offsets and not self._stop.is_set():  # when closing, the final commit below did it
                c.commit(offsets=offsets, asynchronous=False)
            with self._lock:
                self._owned -= tps
                for tp in tps:
                    self._next.pop(tp, None)
            if self.revoke_window is None and tps:
                self.revoke_window = (started, time.monotonic())

        consumer.subscribe([self._topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        last_commit = time.monotonic()
        try:
            while not self._stop.is_set():
                for message in consumer.consume(1000, 0.05):
                    if message.error() is not None:
                        continue
                    tp: TP = (message.topic() or "", message.partition() or 0)
                    offset = message.offset() or 0
                    with self._lock:
                        self._in_flight.setdefault(tp, set()).add(offset)
                        self._next[tp] = offset + 1
                    room.acquire()
                    pool.submit(task, message, tp)
                if time.monotonic() - last_commit > 1.0:
                    offsets = self._positions()
                    if offsets:
                        consumer.commit(offsets=offsets, asynchronous=True)
                    last_commit = time.monotonic()
        finally:
            pool.shutdown()
            offsets = self._positions()
            if offsets:
                consumer.commit(offsets=offsets, asynchronous=False)
            consumer.close()


@dataclass
class _Rebalance:
    ratio: float
    steady: float  # records/s of the first consumer before the second joined
    during: float  # records/s on the partitions it kept, during the revocation
    window: float
    duplicates: int
    timeline: list[tuple[float, float]]  # (seconds since the join, records/s in that 100 ms)
    buffer_at_revoke: int = -1


def _rebalance(
    bootstrap: str, kind: str, max_buffered: int, folder: Path, protocol: str = CLASSIC
) -> _Rebalance:
    topic = f"rebalance-{kind}-{max_buffered}-{protocol}-{time.monotonic_ns()}"
    delivered = _fill(bootstrap, topic, REBALANCE_RECORDS)
    config = with_classic_defaults(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}",
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
        },
        partition_assignment_strategy="cooperative-sticky",
        session_timeout_ms=10_000,
        heartbeat_interval_ms=500,
    )

    def make(name: str) -> _App:
        if kind == "async":
            return _AsyncApp(config, topic, name, max_buffered, WORK)
        return _NaiveApp(config, topic, name, WORK)

    first = make("first")
    first.start()
    _wait(lambda: len(first.log.rows) > 0, 30, "the first consumer's first record")
    time.sleep(4.0)  # measurement: a steady state of several seconds before the join
    joined = time.monotonic()
    second = make("second")
    second.start()
    _wait(lambda: first.revoke_window is not None, 60, "the first consumer's revocation")
    _wait(
        lambda: len(second.owned()) == PARTITIONS // 2 and len(second.log.rows) > 0, 60, "the second's start"
    )
    time.sleep(1.0)  # measurement: some time after the rebalance in the timeline
    first.stop()
    second.stop()
    assert first.revoke_window is not None
    start, end = first.revoke_window
    ns = [(at / 1e9, (partition, offset)) for at, partition, offset, _ in first.log.rows]
    steady = sum(1 for at, _ in ns if joined - 2.0 <= at < joined) / 2.0
    revoked = {p for _, p in first.revoked}
    kept = sum(1 for at, (p, _) in ns if start <= at < end and p not in revoked)
    during = kept / max(end - start, 1e-9)
    verdict = verify(delivered, [first.log.write(folder), second.log.write(folder)])
    bins: dict[int, int] = {}
    for at, _ in ns:
        bins[int((at - joined) * 10 // 1)] = bins.get(int((at - joined) * 10 // 1), 0) + 1
    lo, hi = min(bins), max(bins)
    timeline = [(b / 10, bins.get(b, 0) * 10.0) for b in range(lo, hi + 1)]
    return _Rebalance(
        during / steady if steady else float("nan"),
        steady,
        during,
        end - start,
        verdict.duplicates,
        timeline,
        first.buffer_at_revoke,
    )


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _plot(runs: dict[str, _Rebalance]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 4.5))
    for label, run in runs.items():
        xs = [x for x, _ in run.timeline]
        axes.plot(xs, [y for _, y in run.timeline], label=f"{label} (ratio {run.ratio:.2f})", linewidth=1.2)
    axes.axvline(0, color="grey", linestyle="--", linewidth=0.8)
    axes.text(0.05, axes.get_ylim()[1] * 0.95, "second consumer joins", fontsize=8, color="grey")
    axes.set_xlabel("seconds since the second consumer started")
    axes.set_ylabel("records/s processed by the first consumer (per 100 ms)")
    axes.set_title(f"Rebalance with {FLUSH:g} s revocation: {WORKERS} workers, {WORK * 1000:g} ms/record")
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(PNG, dpi=110)
    plt.close(figure)


def _steady(bootstrap: str, kind: str, work: float, records: int) -> float:
    """Records/s consuming ``records`` prefilled records with ``work`` s per record."""
    topic = f"steady-{kind}-{time.monotonic_ns()}"
    _fill(bootstrap, topic, records)
    config = {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    log = _Log(kind)
    counted = threading.Semaphore(0)
    pool = ThreadPoolExecutor(WORKERS)
    first: float | None = None
    if kind == "async":
        consumer = AsyncConsumer(config, [topic], ordering="unordered", max_in_flight=MAX_IN_FLIGHT)

        def task(message: Message) -> None:
            _work(message, log, work)
            consumer.done(message)
            counted.release()

        handed = 0
        while handed < records:
            batch = consumer.poll(0.1)
            if first is None and batch.records:
                first = time.monotonic()
            for record in batch.records:
                pool.submit(task, record)
            handed += len(batch.records)
        for _ in range(records):
            counted.acquire()
        elapsed = time.monotonic() - (first or 0)
        consumer.close()
    else:
        raw = Consumer({**config, "enable.auto.offset.store": False})
        raw.subscribe([topic])
        room = threading.BoundedSemaphore(MAX_IN_FLIGHT)

        def raw_task(message: Message) -> None:
            _work(message, log, work)
            raw.store_offsets(message=message)
            room.release()
            counted.release()

        handed = 0
        while handed < records:
            for message in raw.consume(1000, 0.1):
                if message.error() is not None:
                    continue
                if first is None:
                    first = time.monotonic()
                room.acquire()
                pool.submit(raw_task, message)
                handed += 1
        for _ in range(records):
            counted.acquire()
        elapsed = time.monotonic() - (first or 0)
        raw.close()
    pool.shutdown()
    return records / elapsed


def _rounds(measure: Callable[[str], float], rounds: int) -> tuple[list[float], list[float]]:
    """(AsyncConsumer, raw) records/s per round, each round one run of each, the first alternating."""
    rates: dict[str, list[float]] = {"async": [], "raw": []}
    for round_ in range(rounds):
        for kind in ("async", "raw") if round_ % 2 else ("raw", "async"):
            rates[kind].append(measure(kind))
    return rates["async"], rates["raw"]


def run() -> list[Result]:
    results: list[Result] = []
    with kafka_bootstrap() as bootstrap, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        naive = _rebalance(bootstrap, "naive", 0, folder)
        runs = {size: _rebalance(bootstrap, "async", size, folder) for size in BUFFER_SIZES}
        chosen = runs[CHOSEN_BUFFER]
        _plot(
            {f"AsyncConsumer (max_buffered {CHOSEN_BUFFER:,})": chosen, "naive (blocks in on_revoke)": naive}
        )
        title = f"rebalance ({FLUSH:g} s revocation): kept partitions' rate during it vs steady before"
        results.append(
            Result(f"{title}, AsyncConsumer max_buffered {CHOSEN_BUFFER:,}", chosen.during, chosen.steady,
                   "rec/s", "ratio >= 0.8")
        )  # fmt: skip
        results.append(Result(f"{title}, naive consumer", naive.during, naive.steady, "rec/s"))
        kip848 = _rebalance(bootstrap, "async", CHOSEN_BUFFER, folder, CONSUMER)
        results.append(
            Result(f"{title}, AsyncConsumer max_buffered {CHOSEN_BUFFER:,}, KIP-848 group", kip848.during,
                   kip848.steady, "rec/s", "ratio >= 0.8")
        )  # fmt: skip
        results.append(
            Result("duplicates after the rebalance, AsyncConsumer vs naive", chosen.duplicates,
                   naive.duplicates, "records", "ordo 0")
        )  # fmt: skip
        for size, run_ in runs.items():
            results.append(
                Result(f"  max_buffered {size:,}: kept {run_.buffer_at_revoke:,} records at the revocation; "
                       f"{run_.duplicates} duplicates", run_.during, run_.steady, "rec/s")
            )  # fmt: skip
        for label, work, records in (("1 ms/record", WORK, 20_000), ("no work", 0.0, 60_000)):
            ordo, raw = _rounds(lambda kind: _steady(bootstrap, kind, work, records), rounds=5)  # noqa: B023
            name = f"steady state, {label}, {WORKERS} workers: AsyncConsumer vs raw Consumer + pool"
            results.append(Result.paired(name, ordo, raw, "rec/s", ">= 0.9"))
    return results
