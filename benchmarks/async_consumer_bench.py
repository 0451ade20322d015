"""AsyncConsumer (KIP-983), measured side by side on the testbed:

- rebalance: 6 partitions, 1 ms of work per record on 4 workers; a second consumer joins and the
  first must release 3 partitions, whose state takes ~3 s to flush. Throughput of the first consumer
  on the partitions it keeps, during the revocation, as a fraction of its steady state before:
  AsyncConsumer (flushes aside, ``delay_revoke`` meanwhile) vs a naive consumer that flushes inside
  ``on_revoke``. Both timelines go to ``benchmarks/async_consumer_rebalance.png``;
- the same for several buffer sizes (how large ``max_buffered`` must be);
- duplicates after the rebalance (records processed twice, counted by the independent verifier).

The steady state (no rebalance) is ``async_steady_bench``.
"""

from __future__ import annotations

import gc
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
from ordo.kafka_group_protocol import CLASSIC, CONSUMER, with_classic_defaults
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
STALL = 0.15  # seconds: an AsyncConsumer poll-loop iteration this long is marked on the timeline
GC_PAUSE = 0.04  # seconds: a garbage collection this long is marked on the timeline


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
        # for the timeline: (monotonic s, what) ownership changes, (monotonic s, records buffered),
        # and poll-loop iterations that took longer than STALL: (began, ended)
        self.events: list[tuple[float, str]] = []
        self.buffered: list[tuple[float, int]] = []
        self.stalls: list[tuple[float, float]] = []

    def _note_owned(self, owned: set[TP]) -> None:
        if owned != self._owned:
            self.events.append((time.monotonic(), f"{self.log.name} owns {len(owned)}"))
        with self._lock:
            self._owned = owned

    def _note_iteration(self, began: float) -> None:
        ended = time.monotonic()
        if ended - began > STALL:
            self.stalls.append((began, ended))

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
                began = time.monotonic()
                batch = consumer.poll(0.05)
                self.buffered.append((began, consumer.buffered))
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
                self._note_owned(consumer.assignment())
                if started is not None and self.revoke_window is None and not self._owned & self.revoked:
                    self.revoke_window = (started, time.monotonic())
                self._note_iteration(began)
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
            self._note_owned(self.owned() | {(p.topic, p.partition) for p in partitions})

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
            self._note_owned(self.owned() - tps)
            with self._lock:
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
    # for the timeline, in seconds since the join: the first consumer's revocation, ownership
    # changes of both consumers, the first's records buffered and stalled poll-loop iterations
    # (AsyncConsumer), the process's garbage collections longer than GC_PAUSE
    revocation: tuple[float, float] = (0.0, 0.0)
    events: list[tuple[float, str]] = field(default_factory=list)
    buffered: list[tuple[float, int]] = field(default_factory=list)
    stalls: list[tuple[float, float]] = field(default_factory=list)
    collections: list[tuple[float, float]] = field(default_factory=list)


class _Collections:
    """The garbage collections of this process that took longer than ``longer_than`` seconds:
    (began, ended), monotonic. A collection stops every Python thread, workers included."""

    def __init__(self, longer_than: float) -> None:
        self.pauses: list[tuple[float, float]] = []
        self._longer_than, self._began = longer_than, 0.0

    def __call__(self, phase: str, _info: dict[str, int]) -> None:
        now = time.monotonic()
        if phase == "start":
            self._began = now
        elif now - self._began > self._longer_than:
            self.pauses.append((self._began, now))

    def __enter__(self) -> _Collections:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *_exc: object) -> None:
        gc.callbacks.remove(self)


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

    collections = _Collections(GC_PAUSE)
    first = make("first")
    with collections:
        first.start()
        joined, stopped, second = _join_and_settle(first, make)
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
        if at >= stopped - 0.1:  # the timeline ends where the consumers were told to stop
            continue
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
        (start - joined, end - joined),
        sorted((at - joined, what) for at, what in first.events + second.events),
        [(at - joined, n) for at, n in first.buffered],
        [(a - joined, b - joined) for a, b in first.stalls],
        [(a - joined, b - joined) for a, b in collections.pauses],
    )


def _join_and_settle(first: _App, make: Callable[[str], _App]) -> tuple[float, float, _App]:
    """A steady state of the first consumer, then a second one joins: (when, when both were told to
    stop, the second), once the rebalance is over and some time after it is in the timeline."""
    _wait(lambda: len(first.log.rows) > 0, 30, "the first consumer's first record")
    time.sleep(4.0)  # measurement: a steady state of several seconds before the join
    joined = time.monotonic()
    second = make("second")
    second.start()
    try:
        _wait(lambda: first.revoke_window is not None, 60, "the first consumer's revocation")
        _wait(
            lambda: len(second.owned()) == PARTITIONS // 2 and len(second.log.rows) > 0,
            60,
            "the second's start",
        )
        time.sleep(1.5)  # measurement: some time after the rebalance in the timeline
    finally:
        stopped = time.monotonic()
        first.stop()
        second.stop()
    return joined, stopped, second


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _plot(runs: dict[str, _Rebalance]) -> None:
    """The first consumer's rate through the rebalance, each run's revocation shaded and what else
    happened marked (the second consumer owning its partitions, long garbage collections, stalled
    poll loops); below, the AsyncConsumer's records buffered, which its kept partitions live on
    while the revocation is held."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (top, bottom) = plt.subplots(
        2, 1, figsize=(10, 7.5), sharex=True, gridspec_kw={"height_ratios": [3, 1.4]}
    )
    colours = dict(zip(runs, ("tab:blue", "tab:orange", "tab:green"), strict=False))
    for label, run in runs.items():
        colour = colours[label]
        top.plot(*zip(*run.timeline, strict=True), label=f"{label} (ratio {run.ratio:.2f})", color=colour,
                 linewidth=1.2)  # fmt: skip
        top.axvspan(*run.revocation, color=colour, alpha=0.12,
                    label=f"{label.split(' (')[0]}: revocation held ({run.window:.1f} s)")  # fmt: skip
        owns = [at for at, what in run.events if what == f"second owns {PARTITIONS // 2}"]
        if owns:
            top.axvline(owns[0], color=colour, linestyle=":", linewidth=1)
        for began, ended in run.stalls:
            bottom.plot([began, ended], [-3_000, -3_000], color=colour, linewidth=5, solid_capstyle="butt")
        for began, ended in run.collections:
            bottom.plot([began, ended], [-7_000, -7_000], color="black", linewidth=5, solid_capstyle="butt")
        if run.buffered:
            bottom.plot(
                *zip(*run.buffered, strict=True), color=colour, linewidth=1.1, label=label.split(" (")[0]
            )
    top.axvline(0, color="grey", linestyle="--", linewidth=0.8)
    top.text(0.05, top.get_ylim()[1] * 0.97, "second consumer starts", fontsize=7, color="grey", va="top")
    top.plot([], [], color="grey", linestyle=":", label="the second consumer owns its 3 partitions")
    top.plot(
        [],
        [],
        color="grey",
        linewidth=4,
        label=f"below: AsyncConsumer poll loop stalled > {STALL * 1000:g} ms",
    )
    top.plot(
        [],
        [],
        color="black",
        linewidth=4,
        label=f"below: garbage collection > {GC_PAUSE * 1000:g} ms (this process)",
    )
    for i, (label, run) in enumerate(runs.items()):
        _label_dips(top, bottom, run, colours[label], 0.12 + 0.3 * i)
    top.set_ylabel("records/s processed by the first\nconsumer (per 100 ms)")
    top.set_title(f"Rebalance with {FLUSH:g} s revocation: {WORKERS} workers, {WORK * 1000:g} ms/record")
    figure.legend(*top.get_legend_handles_labels(), loc="lower center", fontsize=7, ncol=2, frameon=False)
    bottom.set_ylabel("AsyncConsumer:\nrecords buffered")
    bottom.set_xlabel("seconds since the second consumer started")
    figure.tight_layout(rect=(0, 0.12, 1, 1))
    figure.savefig(PNG, dpi=110)
    plt.close(figure)


def _label_dips(top: Any, bottom: Any, run: _Rebalance, colour: str, level: float) -> None:
    """Say what the dips of a run outside its revocation are: the start (the AsyncConsumer's buffer
    filling), the end of the rebalance (the second consumer starting in the same process, and the
    AsyncConsumer refilling its buffer at once: the kept partitions lived on it while the revocation
    was held), a garbage collection, or none of these."""
    steady = run.steady
    start, end = run.revocation
    dips = [(x, y) for x, y in run.timeline if y < 0.6 * steady and not start <= x <= end]
    arrow = {"arrowstyle": "->", "color": colour}
    refill = [(x, y) for x, y in dips if end < x < end + 1.5]
    groups = [g for g in _runs_of(dips) if not set(g) & set(refill)] + ([refill] if refill else [])
    first_x = run.timeline[0][0]

    def explained(group: list[tuple[float, float]]) -> bool:
        at_start = min(group)[0] < first_x + 0.6
        return (
            at_start
            or group is refill
            or any(a - 0.15 <= x <= b + 0.15 for a, b in run.collections for x, _ in group)
        )

    others = [g for g in groups if not explained(g)]
    if others:  # one label for the dips nothing here explains: the deepest
        groups = [g for g in groups if explained(g)] + [min(others, key=lambda g: min(y for _, y in g))]
    for group in groups:
        x, y = min(group, key=lambda point: point[1])
        collected = any(a - 0.15 <= gx <= b + 0.15 for a, b in run.collections for gx, _ in group)
        if x < first_x + 0.6:
            text = "start: the buffer fills" if run.buffered else "start"
        elif group is refill:
            jump = max((n for at, n in run.buffered if end < at < end + 1.5), default=0)
            text = "after the revocation: the second consumer\nstarts in this process"
            if jump:
                text += f", and the first refills\nits buffer ({jump:,} records at once)"
        elif collected:
            text = "a garbage collection"
        else:
            text = (
                f"{len(others)} dip(s) with no GC, start or rebalance:\nunexplained (the 2 cores are shared)"
            )
        if collected and not text.startswith("a garbage"):
            text += "\n+ a garbage collection"
        top.annotate(
            text, (x, y), xytext=(x + 0.35, level * steady), fontsize=7, color=colour, arrowprops=arrow
        )
    bottom.axvspan(start, end, color=colour, alpha=0.12)


def _runs_of(points: list[tuple[float, float]]) -> list[list[tuple[float, float]]]:
    """Consecutive 100 ms points (at most 0.3 s apart) grouped."""
    groups: list[list[tuple[float, float]]] = []
    for point in points:
        if groups and point[0] - groups[-1][-1][0] <= 0.3:
            groups[-1].append(point)
        else:
            groups.append([point])
    return groups


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
    return results
