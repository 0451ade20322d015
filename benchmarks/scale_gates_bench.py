"""A GatedConsumer holding hundreds of gates (issue 35, item 8): a topic expanded 1,024 -> 2,048
partitions, every new partition gated on its old one (the old ones' records not yet committed by
the group), the consumer assigned the 1,024 new partitions and a never-expanded topic whose
records flow meanwhile; another client of its group commits the old partitions' thresholds.

Side by side in one run, today's GatedConsumer (the group's progress fetched in one batched round
off the poll thread, the poll evaluating the held gates against the latest snapshot) and the one
of ``BEFORE``, read from git (it asked the committed offset and the watermarks on the poll thread,
one held partition at a time, at each partition's backoff):

- holding: from the consumer's start until all 1,024 gates hold their partitions;
- poll latency while the 1,024 gates are held: each ``consume(500, 0.05)`` of the flowing topic,
  p50 and p99;
- gate opening latency: from the other client's commit of every old partition's threshold until
  each gated partition's first record is handed out, p50 and max.

and, as the reference, a raw Consumer's ``consume(500, 0.05)`` of the same flowing topic alone (no
gate anywhere): what such a call costs on this machine whatever the gates do.

Rounds alternate which side goes first; each side's figures are the medians over its rounds.
"""

from __future__ import annotations

import importlib
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo.gated_consumer import GatedConsumer

from ._result import Result
from ._testbed import kafka_bootstrap

BEFORE = "f737285"
"""The last commit whose GatedConsumer checked held gates on the poll thread, per partition."""
OLD = 1_024  # partitions before the expansion; after it, twice as many
OLD_RECORDS, NEW_RECORDS = 4, 2  # per old partition (its threshold), per new partition
FLOW_PARTITIONS, FLOW_RECORDS = 4, 300_000
CALLS, WINDOW = 300, 20.0  # poll latency: this many consume() calls, or this many seconds
POLL_P99_TARGET = "<= 100 ms (twice the call's 50 ms timeout)"
"""The poll thread stays the application's while 1,024 gates are held: a consume() that would
return in its timeout returns within twice that at p99 (6-36 ms measured, a raw Consumer's own call
5.6 ms; f737285's per-partition checks on the poll thread: 1-3.2 s)."""
ROUNDS = 2
VALUE = b"x" * 100


def _before() -> Callable[..., Any] | None:
    """The GatedConsumer class of ``BEFORE``, built from git against today's package (its helpers
    are still there, two under other names or shapes: see ``_RENAMED`` and the batch scan below),
    or None with the reason printed."""
    root = Path(__file__).resolve().parent.parent
    try:
        source = subprocess.run(
            ["git", "show", f"{BEFORE}:sdk/ordo/gated_consumer.py"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        module = types.ModuleType("ordo._gated_consumer_before")
        module.__package__ = "ordo"
        sys.modules[module.__name__] = module  # dataclasses look their module up
        renamed = {old: importlib.import_module(new) for old, new in _RENAMED.items()}
        sys.modules.update(renamed)  # for its imports alone
        try:
            exec(compile(source, f"{BEFORE}:sdk/ordo/gated_consumer.py", "exec"), module.__dict__)
        finally:
            for old in renamed:
                del sys.modules[old]
        scan = module.__dict__["scan"]  # today's also says which records are misplaced: BEFORE took three
        module.__dict__["scan"] = lambda messages: scan(messages)[:3]
    except (OSError, subprocess.CalledProcessError, ImportError, AttributeError) as error:
        print(f"  the GatedConsumer of {BEFORE} could not be built ({error}): today's side only")
        return None
    made: Callable[..., Any] = module.GatedConsumer
    return made


_RENAMED = {"ordo.group_protocol": "ordo.kafka_group_protocol"}
"""Modules BEFORE imports that have another name today (issue 38's renames)."""


def _fill(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ensure_log_topics(admin)
    futures = admin.create_topics([NewTopic("gates", 2 * OLD), NewTopic("flow", FLOW_PARTITIONS)])
    for future in futures.values():
        future.result(300)  # a broker opens new logs one by one: 2,048 take a minute here
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    records = [(p, OLD_RECORDS) for p in range(OLD)] + [(p, NEW_RECORDS) for p in range(OLD, 2 * OLD)]
    for partition, count in records:
        for _ in range(count):
            producer.produce("gates", VALUE, partition=partition)
    for i in range(FLOW_RECORDS):
        while True:
            try:
                producer.produce("flow", VALUE, partition=i % FLOW_PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    thresholds = dict.fromkeys(range(OLD), OLD_RECORDS)
    EpochLogWriter({"bootstrap.servers": bootstrap}).write(
        EpochHistory.initial("gates", OLD).begin_fence(2 * OLD).publish(thresholds)
    )


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _polls(consumer: Any) -> list[float]:
    """Seconds each ``consume(500, 0.05)`` took, CALLS of them or for WINDOW seconds; no record of
    a gated partition may come."""
    polls: list[float] = []
    window = time.monotonic() + WINDOW
    while len(polls) < CALLS and time.monotonic() < window:
        began = time.perf_counter()
        got = consumer.consume(500, 0.05)
        polls.append(time.perf_counter() - began)
        assert all(m.error() is not None or m.topic() == "flow" for m in got), "a gate let a record through"
    return polls


def _raw(bootstrap: str, group: str) -> dict[str, float]:
    """The reference: a raw Consumer reading the flowing topic alone, no gate anywhere."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.assign([TopicPartition("flow", p, 0) for p in range(FLOW_PARTITIONS)])
    try:
        polls = _polls(consumer)
    finally:
        consumer.close()
    return {"poll_p50": statistics.median(polls), "poll_p99": _percentile(polls, 0.99)}


def _side(make: Callable[..., Any], bootstrap: str, group: str) -> dict[str, float]:
    """One side's round: (seconds) holding, poll p50, poll p99, gate p50, gate max."""
    config = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    gated = [TopicPartition("gates", p, 0) for p in range(OLD, 2 * OLD)]
    flowing = [TopicPartition("flow", p, 0) for p in range(FLOW_PARTITIONS)]
    started = time.monotonic()
    consumer = make(config, ["gates", "flow"], assignment=gated + flowing)
    try:
        deadline = started + 300
        while len(consumer.closed_gates()) < OLD:
            for message in consumer.consume(500, 0.05):
                assert message.error() is not None or message.topic() == "flow", "a gate let a record through"
            assert time.monotonic() < deadline, f"{len(consumer.closed_gates())} gates held after 300 s"
        holding = time.monotonic() - started
        polls = _polls(consumer)
        committer = Consumer(config)
        committer.commit(
            offsets=[TopicPartition("gates", p, OLD_RECORDS) for p in range(OLD)], asynchronous=False
        )
        committer.close()
        committed = time.monotonic()
        opened: dict[int, float] = {}
        while len(opened) < OLD:
            for message in consumer.consume(500, 0.05):
                if message.error() is None and message.topic() == "gates":
                    opened.setdefault(message.partition() or 0, time.monotonic() - committed)
            assert time.monotonic() < committed + 300, f"{len(opened)} gates open 300 s after the commit"
    finally:
        consumer.close()
    latencies = list(opened.values())
    return {
        "holding": holding,
        "poll_p50": statistics.median(polls),
        "poll_p99": _percentile(polls, 0.99),
        "gate_p50": statistics.median(latencies),
        "gate_max": max(latencies),
    }


def run() -> list[Result]:
    before = _before()
    sides: dict[str, Callable[..., Any]] = {"today": GatedConsumer}
    if before is not None:
        sides["before"] = before
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in [*sides, "raw"]}
    with kafka_bootstrap() as bootstrap:
        _fill(bootstrap)
        for round_ in range(ROUNDS):
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            rounds["raw"].append(_raw(bootstrap, f"gates-raw-{round_}"))
            for name in order:
                rounds[name].append(_side(sides[name], bootstrap, f"gates-{name}-{round_}"))
                shown = ", ".join(f"{k} {v:.3f}" for k, v in rounds[name][-1].items())
                print(f"  round {round_} {name}: {shown} (seconds)")
    figures = {
        name: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for name, runs in rounds.items()
    }
    labels = {
        "holding": "from its start until all gates hold",
        "poll_p50": "poll latency (consume(500, 0.05) of a flowing topic) while the gates are held, p50",
        "poll_p99": "poll latency (consume(500, 0.05) of a flowing topic) while the gates are held, p99",
        "gate_p50": "gate opening latency (old partitions committed -> a gated partition's first record) p50",
        "gate_max": "gate opening latency (old partitions committed -> a gated partition's first record) max",
    }
    today = {key: value * 1e3 for key, value in figures["today"].items()}
    raw = {key: value * 1e3 for key, value in figures["raw"].items()}
    title = f"GatedConsumer holding {OLD:,} gates (expansion {OLD:,} -> {2 * OLD:,})"
    reference = [
        Result.absolute(
            f"the reference: a raw Consumer reading the flowing topic alone, {labels[key]}", raw[key], "ms"
        )
        for key in ("poll_p50", "poll_p99")
    ]
    then = {key: value * 1e3 for key, value in figures["before"].items()} if "before" in figures else {}
    versus = f", today vs {BEFORE} (poll-thread checks per partition)" if then else ""
    # the poll latency's p99 carries the target: an absolute figure, with BEFORE's beside it
    p99 = f"{title}: {labels['poll_p99']}" + (f" ({BEFORE}: {then['poll_p99']:,.0f} ms)" if then else "")
    rows = [
        Result(f"{title}{versus}: {label}", today[key], then.get(key, float("nan")), "ms")
        if key != "poll_p99"
        else Result.absolute(p99, today[key], "ms", POLL_P99_TARGET)
        for key, label in labels.items()
    ]
    return rows + reference
