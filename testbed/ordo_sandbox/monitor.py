"""What the live view shows, gathered once a second from the Kubernetes API (group and expansion
status), Kafka (end offsets), the consumers' logs and the members' output."""

from __future__ import annotations

import ast
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ordo_sandbox.scenario.progress import partitions_of
from ordo_sandbox.scenario.verify import KeyOrder, Processed
from ordo_sandbox.view import AutoscalerRow, MemberRow, Snapshot

__all__ = [
    "LiveOrder",
    "LogTail",
    "Monitor",
    "Sources",
    "autoscaler_row",
    "closed_gates",
    "kafka_end_offsets",
    "slow_units",
]

_log = logging.getLogger(__name__)
GATES_PREFIX = "closed gates: "


class LogTail:
    """The complete lines added to a file since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def lines(self) -> list[str]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        return [line.decode(errors="replace") for line in complete]


class LiveOrder:
    """The consumers' logs checked as they grow (the live counters; the report re-checks the
    whole logs). Records are merged by their timestamps once every consumer can no longer log
    an earlier one: a consumer stamps a batch and writes it at once, so ``lag`` covers it."""

    def __init__(self, lag_ns: int = 2_000_000_000) -> None:
        self.check = KeyOrder()
        self.lag_ns = lag_ns
        self._pending: list[Processed] = []

    def feed(self, consumer: str, lines: Iterable[str]) -> None:
        for line in lines:
            parts = line.split()
            if len(parts) == 5:
                at, key, seq, partition, offset = parts
                self._pending.append(Processed(int(at), consumer, key, int(seq), int(partition), int(offset)))

    def advance(self, now_ns: int) -> None:
        """Check every record stamped before ``now_ns - lag``, in time order."""
        horizon = now_ns - self.lag_ns
        self._pending.sort()
        ready = [r for r in self._pending if r.at_ns <= horizon]
        self._pending = self._pending[len(ready) :]
        for r in ready:
            self.check.add(r.key, r.seq, f"p{r.partition}@{r.offset} by {r.consumer}")

    @property
    def consumed(self) -> int:
        return self.check.records + len(self._pending)


def closed_gates(stderr_lines: Iterable[str]) -> int | None:
    """How many gates the consumer's last report said were closed (``ordo_sandbox.scenario.consumer``
    prints ``closed gates: {partition: {prior partition: threshold}}`` every two seconds)."""
    count = None
    for line in stderr_lines:
        if line.startswith(GATES_PREFIX):
            try:
                count = len(ast.literal_eval(line[len(GATES_PREFIX) :]))
            except (ValueError, SyntaxError):
                continue
    return count


def member_events(stdout_lines: Iterable[str], kind: str) -> list[dict[str, Any]]:
    """The events of one kind a member printed (``ordo_sandbox.member``: one JSON object a line)."""
    events = (json.loads(line) for line in stdout_lines if line.startswith("{"))
    return [event for event in events if event.get("event") == kind]


def slow_units(stdout_lines: Iterable[str]) -> list[float]:
    """The durations of the slow units a member reported (``ordo_sandbox.member``'s ``slow`` events)."""
    return [float(event["seconds"]) for event in member_events(stdout_lines, "slow")]


@dataclass
class Sources:
    """Where the monitor looks; the runner fills it in as things start."""

    groups: Any = None
    group: str = ""
    expansions: Any = None
    expansion: str = ""
    topic: str = ""
    watermarks: Callable[[], tuple[int, int]] | None = None
    """(visible partitions, sum of end offsets) of the topic"""
    consumer_logs: dict[str, Path] = field(default_factory=dict)
    consumer_stderr: dict[str, Path] = field(default_factory=dict)
    member_stdout: dict[str, Path] = field(default_factory=dict)
    killed: set[str] = field(default_factory=set)
    source_orders: Callable[[], int] = lambda: 0
    spark_rows: Callable[[], int | None] = lambda: None
    next_stage: Callable[[], str] = lambda: ""
    autoscalers: Any = None
    """``ordo sandbox --autoscale``: the TopicAutoscalers (``get(name)``) and the one to show."""
    autoscaler: str = ""


class Monitor(threading.Thread):
    """Builds a :class:`Snapshot` every ``interval`` seconds; ``snapshot`` is always the latest."""

    def __init__(self, sources: Sources, started: float, interval: float = 1.0) -> None:
        super().__init__(name="sandbox-monitor", daemon=True)
        self.sources, self.started, self.interval = sources, started, interval
        self.order = LiveOrder()
        self.events: list[str] = []
        self.snapshot = Snapshot(group=sources.group, topic=sources.topic)
        self._halt = threading.Event()
        self._tails: dict[str, LogTail] = {}
        self._gates: dict[str, int] = {}
        self._stalls: dict[str, list[float]] = {}
        self._last: tuple[float, int, int] | None = None
        self.history: list[tuple[float, int]] = []
        """(seconds, records produced so far) at each refresh: the rate reached."""
        self.decisions: dict[str, dict[str, Any]] = {}
        """Every lastDecision the autoscaler's status showed, by the expansion it created."""

    def event(self, text: str) -> None:
        self.events.append(f"{time.monotonic() - self.started:6.1f} s  {text}")

    @property
    def longest_stall(self) -> float:
        return max((max(v) for v in self._stalls.values() if v), default=0.0)

    def run(self) -> None:
        while not self._halt.wait(self.interval):  # the view's refresh period
            self.refresh()

    def stop(self) -> None:
        self._halt.set()
        self.join(10)

    def refresh(self) -> None:
        try:
            self.snapshot = self._build()
        except Exception as error:  # a failed read (e.g. the API restarting) skips one refresh
            _log.debug("monitor refresh failed: %s", error)

    def _tail(self, name: str, path: Path) -> list[str]:
        tail = self._tails.setdefault(name, LogTail(path))
        return tail.lines()

    def _build(self) -> Snapshot:
        s = self.sources
        now = time.monotonic()
        for consumer, path in s.consumer_logs.items():
            self.order.feed(consumer, self._tail(f"log:{consumer}", path))
        self.order.advance(time.monotonic_ns())
        for consumer, path in s.consumer_stderr.items():
            gates = closed_gates(self._tail(f"err:{consumer}", path))
            if gates is not None:
                self._gates[consumer] = gates
        for pod, path in s.member_stdout.items():
            self._stalls.setdefault(pod, []).extend(slow_units(self._tail(f"out:{pod}", path)))

        snap = replace(self.snapshot, elapsed=now - self.started, next_stage=s.next_stage())
        snap.events = list(self.events)
        snap.source_orders = s.source_orders()
        snap.gates_closed = dict(self._gates)
        snap.longest_stall = self.longest_stall
        snap.consumed, snap.distinct = self.order.consumed, self.order.check.distinct
        snap.redeliveries = self.order.check.duplicates
        snap.order_violations = self.order.check.order_violations
        snap.spark_rows = s.spark_rows()
        if s.groups is not None:
            self._group(snap, s.groups.status(s.group))
        phase, body = "", {}
        if s.autoscalers is not None:
            body = s.autoscalers.get(s.autoscaler)
            decision = (body.get("status") or {}).get("lastDecision")
            if decision:
                self.decisions.setdefault(decision["expansion"], decision)
            s.expansion = (body.get("status") or {}).get("expansion") or s.expansion
        if s.expansions is not None and s.expansion:
            status = s.expansions.status(s.expansion)
            phase = str(status.get("phase") or "Pending")
            self._expansion(snap, status)
        if s.autoscalers is not None:
            snap.autoscaler = autoscaler_row(s.autoscaler, body, phase, len(self.decisions))
        if s.watermarks is not None:
            snap.partitions, snap.in_kafka = s.watermarks()
        if self._last is not None and now > self._last[0]:
            dt = now - self._last[0]
            snap.produced_per_s = max(0.0, (snap.in_kafka - self._last[1]) / dt)
            snap.consumed_per_s = max(0.0, (snap.consumed - self._last[2]) / dt)
        self._last = (now, snap.in_kafka, snap.consumed)
        self.history.append((snap.elapsed, snap.source_orders))
        return snap

    def _group(self, snap: Snapshot, status: dict[str, Any]) -> None:
        snap.generation = int(status.get("generation") or 0)
        standby = set(status.get("standby") or [])
        rows = [
            MemberRow(
                m["pod"],
                tuple(m.get("partitions") or ()),
                m.get("acked"),
                "standby" if m["pod"] in standby else "live",
            )
            for m in status.get("members") or []
        ]
        listed = {r.pod for r in rows}
        rows += [MemberRow(pod, state="killed") for pod in sorted(self.sources.killed - listed)]
        rows += [
            MemberRow(pod, state="starting")
            for pod in self.sources.member_stdout
            if pod not in listed and pod not in self.sources.killed
        ]
        snap.members = sorted(rows, key=lambda r: r.pod)
        snap.unassigned = tuple(status.get("unassigned") or ())

    def _expansion(self, snap: Snapshot, status: dict[str, Any]) -> None:
        phase = status.get("phase") or "Pending"
        source, target = status.get("fromPartitions"), status.get("toPartitions")
        snap.expansion = f"{phase} ({source} → {target})" if source and target else phase
        if status.get("epoch") is not None and phase == "Completed":
            snap.epoch = int(status["epoch"])
        fenced = phase in ("Fencing", "Expanding", "Publishing")
        snap.stalled_for = _since(status.get("fencedAt") or status.get("startedAt")) if fenced else None


def autoscaler_row(name: str, body: dict[str, Any], phase: str, growths: int) -> AutoscalerRow:
    """What the view shows of a TopicAutoscaler (``body``: the resource; ``phase``: of the
    expansion its status names, "" when it names none or it is unknown)."""
    spec, status = body.get("spec") or {}, body.get("status") or {}
    decision = status.get("lastDecision") or {}
    load = status.get("load") or {}
    in_flight = status.get("expansion")
    return AutoscalerRow(
        name=name,
        current=status.get("currentPartitions"),
        desired=status.get("desiredPartitions"),
        bounds=(int(spec.get("minPartitions", 1)), int(spec.get("maxPartitions", 0))),
        rate=load.get("recordsPerSecondPerPartition"),
        target=float((spec.get("targets") or {}).get("recordsPerSecondPerPartition") or 0.0),
        decision=(
            f"{decision['fromPartitions']} → {decision['toPartitions']} at {str(decision['time'])[11:23]}"
            if decision
            else "none yet"
        ),
        reason=str(decision.get("reason") or status.get("message") or ""),
        expansion=f"{in_flight} ({phase or 'Pending'})" if in_flight else "none",
        growths=growths,
    )


def _since(rfc3339: str | None) -> float | None:
    if not rfc3339:
        return None
    from datetime import datetime

    try:
        began = datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, time.time() - began.timestamp())


def kafka_end_offsets(consumer: Any, topic: str) -> tuple[int, int]:
    """(partitions, the sum of their end offsets): records, aborted ones and transaction markers."""
    partitions = partitions_of(consumer, topic)
    return len(partitions), sum(consumer.get_watermark_offsets(tp, timeout=5)[1] for tp in partitions)
