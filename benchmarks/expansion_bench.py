"""Expansion costs, measured on the testbed with the real operator:

- producer stall per expansion (first blocked produce -> first produce at the new count), p50/p99,
  with the whole fence as before issue 43 (every record of the topic waits:
  ``_keys_producer.WholeFence``; with the staying-keys rule no produce() waits for a fence, so
  the row keeps measuring the fence's length as a producer sees it) over 20 expansions, STEADY
  seconds apart, with 4 producers at RATE records/s each throughout, each keeping at most QUEUED
  records not yet acknowledged. A fence waits until what each producer sent is written, since the
  thresholds must cover it, so the stall grows with the backlog the broker has: at 4 x 10,000
  records/s this 2-core machine (broker, API server, operator and producers on it) fell behind,
  the queues stayed full, and the fence's flush alone took 0.4-1.0 s. The rate here is one the
  broker keeps up with, so the figure is the protocol's;
- gate opening latency (prior partition committed past its threshold -> gated partition delivering);
- keys that stay are never stalled (issue 43): three topics written side by side, each by
  KEYS_PRODUCERS producers at KEYS_RATE records/s, each producer in a process of its own (every
  record with a delivery callback: with ordo's own transactions it runs once the record is
  committed), KEYS_ROUNDS rounds each on new topics of 4 partitions grown to 8: one never grown
  (the baseline), one grown with the rule (staying keys written through the fence, moved keys
  parked), one grown with the whole fence as before (every record of the topic waits). Per round
  both expansions are created at once. Staying keys' produce-to-delivery latency inside the
  expansions' windows against the baseline's same keys in the same windows; moved keys' parked
  time; the whole fence's stall per blocked produce().

GatedConsumer's throughput is ``gated_consumer_bench``.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import statistics
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import kubernetes
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from ordo.control_topics import DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC
from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLog, EpochLogWriter, ensure_log_topics
from ordo.gated_consumer import GatedConsumer
from ordo.ordered_producer import OrderedProducer
from ordo.partitioners import murmur2_partition
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions

from . import _keys_producer
from ._keys_producer import Sample, WholeFence
from ._plot import HERE, timeline_png
from ._result import Result
from ._testbed import full_testbed

EXPANSIONS = 20
PRODUCERS = 4
RATE = 2_500  # records/s per producer
STEADY = 1.5  # seconds of steady producing between two expansions
QUEUED = 2_000


KEYS_ROUNDS = 12
KEYS_PRODUCERS = 2
KEYS_RATE = 500  # records/s per producer
KEYS = 1_000


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
    producers = [WholeFence(config, session_timeout=3.0) for _ in range(PRODUCERS)]
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


def _keys_through_fences(bootstrap: str, kubeconfig: Path, workdir: Path) -> dict[str, Any]:
    """The three variants side by side (module docstring); their samples and the windows. Each
    producer runs in a process of its own (``_keys_producer``), as in a pod of its own."""
    api: Any = kubernetes.config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
    core: Any = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "bench-keys"}})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    operator = OperatorProcess(
        kubeconfig, bootstrap, namespaces=["bench-keys"], log_path=workdir / "operator-keys.log"
    )
    operator.start()
    variants = ("steady", "rule", "whole")
    every = [f"keys-{v}-{step}" for step in range(KEYS_ROUNDS) for v in variants]
    for done in admin.create_topics([NewTopic(t, 4) for t in every]).values():
        done.result(10)
    spawn = multiprocessing.get_context("spawn")  # no fork of a process holding Kafka clients
    children: dict[str, list[tuple[Any, Connection]]] = {v: [] for v in variants}
    for v in variants:
        for _ in range(KEYS_PRODUCERS):
            ours, theirs = spawn.Pipe()
            topics = [f"keys-{v}-{step}" for step in range(KEYS_ROUNDS)]
            process = spawn.Process(
                target=_keys_producer.run, args=(theirs, bootstrap, v == "whole", topics, KEYS_RATE, KEYS)
            )
            process.start()
            children[v].append((process, ours))
    published: dict[str, float] = {}  # topic -> wall time a reader of the epoch log saw its epoch 1
    log = EpochLog({"bootstrap.servers": bootstrap})

    def seen(history: EpochHistory) -> None:
        if history.active.epoch == 1:
            published.setdefault(history.topic, time.time())

    unsubscribe = log.subscribe(seen)

    def tell(variant: str, topic: str | None) -> None:
        for _process, connection in children[variant]:
            connection.send(topic)

    for v in variants:
        for _process, connection in children[v]:
            if not connection.poll(120) or connection.recv() != "ready":
                raise TimeoutError(f"a {v} producer did not start within 120 s")
    # the operator records the topics' epoch 0 as their producers report them (36 writes): the
    # rounds measure expansions, not that, so they begin once it is done
    if not log.wait_for(lambda: all(log.history(t) is not None for t in every), 120):
        raise TimeoutError("the operator did not record the benchmark's topics within 120 s")
    stop = threading.Event()
    expansions = Expansions(kubernetes.client.CustomObjectsApi(api), "bench-keys")
    windows: list[tuple[float, float]] = []
    found: dict[str, list[Any]] = {v: [] for v in variants}
    try:
        for step in range(KEYS_ROUNDS):
            for v in variants:
                tell(v, f"keys-{v}-{step}")
            stop.wait(STEADY)  # steady producing (on the new topics) first, not synchronisation
            created = time.monotonic()
            for v in ("rule", "whole"):
                expansions.create(f"{v}-{step}", f"keys-{v}-{step}", 8)
            for v in ("rule", "whole"):
                expansions.wait_phase(f"{v}-{step}", "Completed", 60)
            windows.append((created, time.monotonic()))
            print(f"  keys round {step + 1}/{KEYS_ROUNDS} done", flush=True)
        stop.wait(STEADY)  # what was parked or held at the last one is delivered too
    finally:
        for v in variants:
            tell(v, None)
            for process, connection in children[v]:
                if connection.poll(60):
                    found[v].append(connection.recv())
                process.join(30)
                if process.is_alive():
                    process.kill()
        operator.stop()
        api.close()
        unsubscribe()
        log.close()
    return {
        "breakdown": _fence_breakdown(
            bootstrap, [f"keys-rule-{step}" for step in range(len(windows))], published
        ),
        "samples": {v: [s for samples, _, _ in found[v] for s in samples] for v in variants},
        "windows": windows,
        "parks": [held for _, parks, _ in found["rule"] for _topic, held in parks],
        "rule_stalls": [held for _, _, stalls in found["rule"] for _topic, held in stalls],
        "whole_stalls": [held for _, _, stalls in found["whole"] for _topic, held in stalls],
    }


def _stamped(bootstrap: str, topic: str) -> list[tuple[float, bytes, bytes]]:
    """(CreateTime s, key, value) of every record of a one-partition control topic."""
    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-breakdown", "enable.partition.eof": True}
    )
    reader.assign([TopicPartition(topic, 0, 0)])
    found: list[tuple[float, bytes, bytes]] = []
    try:
        while True:
            message = reader.poll(5)
            if message is None:
                break
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    break
                continue
            found.append((message.timestamp()[1] / 1000, message.key() or b"", message.value() or b""))
    finally:
        reader.close()
    return found


def _fence_breakdown(
    bootstrap: str, topics: list[str], published: dict[str, float]
) -> dict[str, list[float]]:
    """Per expansion, from the records' stamps (one clock: every process is on this machine): fence
    written -> last acknowledgement written (producers see the fence, commit, report), -> publish
    written (the operator notices, reads the registry and the thresholds, records status, writes),
    -> a reader of the epoch log sees the publish (the transaction's commit, the fetch)."""
    fenced: dict[str, float] = {}
    active: dict[str, float] = {}
    for stamp, key, value in _stamped(bootstrap, DEFAULT_EPOCH_TOPIC):
        topic = key.decode()
        if topic in topics:
            state = json.loads(value)["epochs"][-1]
            if state["epoch"] == 1:
                (fenced if state["state"] == "fencing" else active).setdefault(topic, stamp)
    first: dict[tuple[str, bytes], float] = {}  # (topic, producer) -> its first acknowledgement
    for stamp, producer, value in _stamped(bootstrap, DEFAULT_REGISTRY_TOPIC):
        for topic, epoch in (json.loads(value).get("fenced") or {}).items():
            if topic in topics and epoch == 1:
                first.setdefault((topic, producer), stamp)
    acked: dict[str, float] = {}  # topic -> the last producer's first acknowledgement
    for (topic, _producer), stamp in first.items():
        acked[topic] = max(acked.get(topic, 0.0), stamp)
    parts: dict[str, list[float]] = {
        "fence -> last ack": [],
        "last ack -> publish": [],
        "publish -> seen": [],
    }
    for topic in topics:
        if topic in fenced and topic in acked and topic in active and topic in published:
            parts["fence -> last ack"].append(acked[topic] - fenced[topic])
            parts["last ack -> publish"].append(active[topic] - acked[topic])
            parts["publish -> seen"].append(published[topic] - active[topic])
    return parts


def _in_windows(samples: list[Sample], windows: list[tuple[float, float]], staying: bool) -> list[float]:
    """Latencies of records produced inside a window whose key stays (or moves) 4 -> 8."""
    found = []
    for started, latency, key in samples:
        stays = murmur2_partition(key, 4) == murmur2_partition(key, 8)
        if stays == staying and any(a <= started <= b for a, b in windows):
            found.append(latency)
    return found


def _keys_results(measured: dict[str, Any]) -> list[Result]:
    samples, windows = measured["samples"], measured["windows"]
    base = _in_windows(samples["steady"], windows, staying=True)
    rule = _in_windows(samples["rule"], windows, staying=True)
    whole = _in_windows(samples["whole"], windows, staying=True)
    moved_rule = _in_windows(samples["rule"], windows, staying=False)
    moved_whole = _in_windows(samples["whole"], windows, staying=False)
    parks, rule_stalls, whole_stalls = measured["parks"], measured["rule_stalls"], measured["whole_stalls"]
    spans = [b - a for a, b in windows]
    print(f"  keys: expansion windows p50 {statistics.median(spans):.3f}s; where a fence's time goes:")
    for part, values in measured["breakdown"].items():
        if values:
            print(f"    {part}: n={len(values)} p50 {statistics.median(values):.4f}s max {max(values):.4f}s")
    for name, values in (
        ("staying, not grown", base), ("staying, rule", rule), ("staying, whole fence", whole),
        ("moved, rule", moved_rule), ("moved, whole fence", moved_whole), ("parked (rule)", parks),
        ("produce() held (rule)", rule_stalls), ("produce() held (whole fence)", whole_stalls),
    ):  # fmt: skip
        if values:
            p50, p99 = statistics.median(values), _percentile(values, 0.99)
            print(f"    {name}: n={len(values)} p50 {p50:.4f}s p99 {p99:.4f}s")
    load = f"{KEYS_PRODUCERS} producers x {KEYS_RATE:,} rec/s per topic, 4 -> 8, {len(windows)} expansions"
    return [
        Result(
            f"staying keys' produce-to-delivery latency during an expansion vs the same keys of a topic "
            f"not grown at the same moments, p50 ({load})",
            statistics.median(rule), statistics.median(base), "s", "<= 1.1",
        ),
        Result(
            f"staying keys' produce-to-delivery latency during an expansion vs not grown, p99 ({load})",
            _percentile(rule, 0.99), _percentile(base, 0.99), "s", "<= 1.1",
        ),
        Result(
            f"the whole fence (before issue 43): staying keys' produce-to-delivery latency during an "
            f"expansion vs not grown, p99 ({load})",
            _percentile(whole, 0.99), _percentile(base, 0.99), "s", "-",
        ),
        Result.absolute(
            f"moved keys' records parked through the fence, p50 ({load})", statistics.median(parks), "s", "-"
        ),
        Result.absolute(
            f"moved keys' records parked through the fence, p99 ({load})",
            _percentile(parks, 0.99), "s", "<= 0.1 s",
        ),
        Result.absolute(
            f"the whole fence (before issue 43): produce() held per expansion, p50 ({load})",
            statistics.median(whole_stalls), "s", "-",
        ),
        Result.absolute(
            f"the whole fence (before issue 43): produce() held per expansion, p99 ({load})",
            _percentile(whole_stalls, 0.99), "s", "-",
        ),
    ]  # fmt: skip


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
        keys = _keys_through_fences(bootstrap, kubeconfig, Path(tmp))
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
        *_keys_results(keys),
        Result.absolute(
            f"producer stall per expansion, whole fence ({load}), p50", statistics.median(stalls), "s", "-"
        ),
        Result.absolute(
            f"producer stall per expansion, whole fence ({load}), p99",
            _percentile(stalls, 0.99),
            "s",
            "<= 1 s",
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
