"""Expansion costs, measured on the testbed with the real operator:

- producer stall per expansion (first blocked produce -> first produce at the new count), p50/p99
  over 20 expansions, STEADY seconds apart, with 4 producers at RATE records/s each throughout,
  each keeping at most QUEUED records not yet acknowledged. A fence waits until what each
  producer sent is written, since the thresholds must cover it, so the stall grows with the
  backlog the broker has: at 4 x 10,000 records/s this 2-core machine (broker, API server,
  operator and producers on it) fell behind, the queues stayed full, and the fence's flush alone
  took 0.4-1.0 s. The rate here is one the broker keeps up with, so the figure is the protocol's;
- gate opening latency (prior partition committed past its threshold -> gated partition delivering).

GatedConsumer's throughput is ``gated_consumer_bench``.
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import kubernetes
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo.gated_consumer import GatedConsumer
from ordo.ordered_producer import OrderedProducer
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions

from ._plot import HERE, timeline_png
from ._result import Result
from ._testbed import full_testbed

EXPANSIONS = 20
PRODUCERS = 4
RATE = 2_500  # records/s per producer
STEADY = 1.5  # seconds of steady producing between two expansions
QUEUED = 2_000


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _stalls(bootstrap: str, kubeconfig: Path, workdir: Path) -> list[float]:
    api: Any = kubernetes.config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
    core: Any = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "bench"}})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ensure_log_topics(admin)
    admin.create_topics([NewTopic("stall", 2)])["stall"].result(10)
    operator = OperatorProcess(kubeconfig, bootstrap, namespaces=["bench"], log_path=workdir / "operator.log")
    operator.start()
    config = {"bootstrap.servers": bootstrap, "linger.ms": 2, "queue.buffering.max.messages": QUEUED}
    producers = [OrderedProducer(config, session_timeout=3.0) for _ in range(PRODUCERS)]
    stop = threading.Event()
    produced = [0] * PRODUCERS
    samples: list[tuple[float, int]] = []  # (monotonic time, records produced so far)

    def produce(index: int, producer: OrderedProducer) -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce("stall", b"x" * 100, key=f"k{i % 1000}".encode())
            except BufferError:  # QUEUED records not yet acknowledged: the broker is behind
                producer.poll(0.01)
                continue
            i += 1
            produced[index] = i
            if i % 25 == 0:
                producer.poll(0)
                time.sleep(25 / RATE)  # a steady rate (at most RATE), not synchronisation

    def sample() -> None:
        while not stop.wait(0.1):  # the timeline's resolution
            samples.append((time.monotonic(), sum(produced)))

    threads = [threading.Thread(target=produce, args=(i, p)) for i, p in enumerate(producers)]
    threads.append(threading.Thread(target=sample))
    for t in threads:
        t.start()
    expansions = Expansions(kubernetes.client.CustomObjectsApi(api), "bench")
    windows: list[tuple[float, float]] = []  # (created, seen Completed) per expansion
    try:
        for step in range(EXPANSIONS):
            # steady producing before each one (the first after a warm-up: on a broker just
            # started the first fence's flush took ~1 s, the JVM still compiling), not synchronisation
            stop.wait(STEADY)
            created = time.monotonic()
            expansions.create(f"e{step}", "stall", 3 + step)
            expansions.wait_phase(f"e{step}", "Completed", 60)
            windows.append((created, time.monotonic()))
            print(f"  expansion {step + 1}/{EXPANSIONS} done", flush=True)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        _plot_timeline(samples, windows[:4])
        stalls = [held for p in producers for topic, held in p.stalls if topic == "stall"]
        for p in producers:
            p.close()
        operator.stop()
        api.close()
    return stalls


def _plot_timeline(samples: list[tuple[float, int]], windows: list[tuple[float, float]]) -> None:
    """Producer throughput through the first expansions, each one's window shaded."""
    if len(samples) < 2 or not windows:
        return
    start, end = windows[0][0] - 1.0, windows[-1][1] + 1.0  # less than STEADY: no next fence
    points = [
        (t1 - start, (n1 - n0) / (t1 - t0))
        for (t0, n0), (t1, n1) in itertools.pairwise(samples)
        if start <= t1 <= end
    ]
    timeline_png(
        HERE / "expansion_timeline.png",
        {f"{PRODUCERS} OrderedProducers, records/s (per 100 ms)": points},
        title=f"Producer throughput through {len(windows)} expansions (3 -> {3 + len(windows)} partitions)",
        xlabel="seconds",
        ylabel="records/s",
        spans=[(a - start, b - start, "expansion: created -> Completed (fence inside)") for a, b in windows],
    )


def _gate_latency(bootstrap: str, auto_commit: bool, rounds: int = 10) -> list[float]:
    """Seconds from the moment partition 0 is processed up to its threshold until a member held
    behind it gets its first record. Without auto-commit, "processed" is an explicit commit by
    another client; with it (at librdkafka's default 5 s interval), another GatedConsumer reads
    partition 0 and the latency includes its own commit."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    latencies = []
    for r in range(rounds):
        topic = f"latency-{'auto' if auto_commit else 'explicit'}-{r}"
        admin.create_topics([NewTopic(topic, 2)])[topic].result(10)
        producer = Producer({"bootstrap.servers": bootstrap})
        for _ in range(100):
            producer.produce(topic, b"old", partition=0)
        producer.flush(10)
        history = EpochHistory.initial(topic, 2).begin_fence(4)
        writer = EpochLogWriter({"bootstrap.servers": bootstrap})
        writer.write(history)
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(10)
        writer.write(history.publish({0: 100, 1: 0}))
        fresh = Producer({"bootstrap.servers": bootstrap})
        fresh.produce(topic, b"new", partition=2)
        fresh.flush(10)
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": topic,
            "enable.auto.commit": auto_commit,
            "auto.offset.reset": "earliest",
        }
        waiting = GatedConsumer(config, [topic], assignment=[TopicPartition(topic, 2, 0)])
        deadline = time.monotonic() + 10
        while not waiting.closed_gates() and time.monotonic() < deadline:
            waiting.consume(10, 0.1)
        other: Any
        if auto_commit:
            other = GatedConsumer(config, [topic], assignment=[TopicPartition(topic, 0, 0)])
            read = 0
            while read < 100 and time.monotonic() < deadline:
                read += sum(1 for m in other.consume(100, 0.1) if m.error() is None)
        else:
            other = Consumer(config)
            other.commit(offsets=[TopicPartition(topic, 0, 100)], asynchronous=False)
        processed = time.monotonic()
        got: list[Any] = []
        while not got and time.monotonic() < processed + 10:
            if auto_commit:
                other.consume(10, 0.01)  # its last record counts as processed from this call
            got = [m for m in waiting.consume(10, 0.05) if m.error() is None]
        latencies.append(time.monotonic() - processed)
        other.close()
        waiting.close()
    return latencies


def run() -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp, full_testbed(Path(tmp) / "bed") as (bootstrap, kubeconfig):
        stalls = _stalls(bootstrap, kubeconfig, Path(tmp))
        latencies = _gate_latency(bootstrap, auto_commit=False)
        auto_latencies = _gate_latency(bootstrap, auto_commit=True)
    print(
        f"  stalls: n={len(stalls)} p50={statistics.median(stalls):.3f}s p99={_percentile(stalls, 0.99):.3f}s"
    )
    print(f"  gate latency: p50={statistics.median(latencies):.3f}s max={max(latencies):.3f}s")
    print(f"  with auto-commit: p50={statistics.median(auto_latencies):.3f}s max={max(auto_latencies):.3f}s")
    load = f"{PRODUCERS} producers x {RATE:,} rec/s"
    return [
        Result.absolute(f"producer stall per expansion ({load}), p50", statistics.median(stalls), "s", "-"),
        Result.absolute(
            f"producer stall per expansion ({load}), p99", _percentile(stalls, 0.99), "s", "<= 1 s"
        ),
        Result.absolute("gate opening latency, p50", statistics.median(latencies), "s", "<= 0.5 s"),
        Result.absolute("gate opening latency, max", max(latencies), "s", "<= 0.5 s"),
        Result.absolute(
            "gate opening latency, other member on auto-commit (5 s interval), p50",
            statistics.median(auto_latencies),
            "s",
            "<= 0.5 s",
        ),
        Result.absolute(
            "gate opening latency, other member on auto-commit (5 s interval), max",
            max(auto_latencies),
            "s",
            "<= 0.5 s",
        ),
    ]
