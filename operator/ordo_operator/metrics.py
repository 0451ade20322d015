"""The operator's Prometheus metrics and the HTTP endpoint that serves them.

Handlers call the small functions here (``record_rebalance``, ``record_group_status``,
``ExpansionTimer``, ``record_expansion_phase``, ``record_error``) rather than touching prometheus
objects, so metric names and labels live in one place. Labels are bounded: a resource's namespace
and name, an expansion phase, an outcome, an error kind — never a pod, a producer id or a
partition.

A resource's namespace is the label ``resource_namespace``, not ``namespace``: Prometheus gives
every scraped series its target's ``namespace`` (the operator's own), and a metric's own
``namespace`` would lose to it (renamed ``exported_namespace``) unless the scrape honoured labels.
The chart's PrometheusRule and Grafana dashboard query these names; tests/deploy/test_monitoring.py
checks that each name they use is exported here or by the SDK (``ordo.metrics``).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import prometheus_client
from prometheus_client import Counter, Gauge, Histogram

from ordo.api import ExpansionPhase

__all__ = [
    "AUTOSCALER_CURRENT_PARTITIONS",
    "AUTOSCALER_DECISIONS",
    "AUTOSCALER_DESIRED_PARTITIONS",
    "AUTOSCALER_RECORDS_PER_SECOND",
    "CONTROL_TOPIC_BELOW_RECOMMENDED",
    "EXPANSIONS",
    "EXPANSION_PHASE",
    "EXPANSION_PHASE_SECONDS",
    "EXPANSION_PHASE_SINCE",
    "EXPANSION_UNDO_BLOCKED",
    "FENCE_WAIT_SECONDS",
    "GROUP_GENERATION",
    "GROUP_MEMBERS",
    "GROUP_UNASSIGNED",
    "OPERATOR_ERRORS",
    "OPERATOR_WORKING",
    "ORPHAN_FENCES_ABORTED",
    "PHASES",
    "PRODUCERS_FENCED",
    "REBALANCES",
    "REBALANCE_SECONDS",
    "RESOURCE_READY",
    "TOPIC_PARTITIONS_OUTSIDE_EPOCHS",
    "ExpansionTimer",
    "count_errors",
    "error_kind",
    "forget_autoscaler",
    "forget_expansion",
    "forget_group",
    "record_autoscaler",
    "record_autoscaler_decision",
    "record_error",
    "record_expansion_phase",
    "record_fence",
    "record_group_status",
    "record_rebalance",
    "start_metrics_server",
]

P = ParamSpec("P")
R = TypeVar("R")

# Rebalances take from milliseconds (a join) to a session timeout (a dead member): up to minutes.
_REBALANCE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# Expansion phases: Expanding/Publishing take milliseconds, Fencing up to fenceTimeoutSeconds.
_PHASE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

# Every phase an expansion can be in, for the 1/0 state set
PHASES = tuple(phase.value for phase in ExpansionPhase)
_GROUP = ["resource_namespace", "group"]
_EXPANSION = ["resource_namespace", "expansion"]

REBALANCES = Counter("ordo_rebalances", "ProducerGroup rebalances (assignment generation bumps)", _GROUP)
REBALANCE_SECONDS = Histogram(
    "ordo_rebalance_duration_seconds",
    "From the change that triggered a rebalance to every member holding its new assignment",
    _GROUP,
    buckets=_REBALANCE_BUCKETS,
)
GROUP_MEMBERS = Gauge("ordo_group_members", "Live members of a ProducerGroup", _GROUP)
GROUP_GENERATION = Gauge("ordo_group_generation", "Current assignment generation of a ProducerGroup", _GROUP)
GROUP_UNASSIGNED = Gauge(
    "ordo_group_unassigned_partitions",
    "Source partitions of a ProducerGroup that no member owns now (all of them without live members; "
    "a few for a moment while a rebalance moves them)",
    _GROUP,
)
RESOURCE_READY = Gauge(
    "ordo_resource_ready",
    "1 when a resource's Ready condition is True (a group settled without a problem, an expansion "
    "Completed), else 0",
    ["kind", "resource_namespace", "name"],
)
EXPANSION_PHASE = Gauge(
    "ordo_expansion_phase",
    "1 for the phase an OrderedTopicExpansion is in, 0 for the others",
    [*_EXPANSION, "phase"],
)
EXPANSION_PHASE_SINCE = Gauge(
    "ordo_expansion_phase_since_seconds",
    "When (Unix time) an OrderedTopicExpansion entered its current phase, as this operator process "
    "saw it: an interrupted phase counts from the restart, an ended one from its end",
    _EXPANSION,
)
EXPANSION_PHASE_SECONDS = Histogram(
    "ordo_expansion_phase_duration_seconds",
    "Time an OrderedTopicExpansion spent in a phase (measured by the operator process that drove it)",
    ["phase"],
    buckets=_PHASE_BUCKETS,
)
EXPANSIONS = Counter("ordo_expansions", "Expansions that ended, by final phase", ["outcome"])
PRODUCERS_FENCED = Counter(
    "ordo_producers_fenced", "Producer acknowledgements of a fence (one per live producer per expansion)"
)
FENCE_WAIT_SECONDS = Histogram(
    "ordo_fence_wait_seconds",
    "From the fence epoch being written to every live producer having acknowledged it",
    buckets=_PHASE_BUCKETS,
)
OPERATOR_ERRORS = Counter("ordo_operator_errors", "Errors raised by operator handlers, by kind", ["kind"])
OPERATOR_WORKING = Gauge(
    "ordo_operator_working",
    "1 while this replica works (kopf peering: no live peer outranks it; always, alone), 0 on standby",
)
ORPHAN_FENCES_ABORTED = Counter(
    "ordo_orphan_fences_aborted",
    "Fencing epochs aborted by the operator because no expansion of their topic was in flight",
)
CONTROL_TOPIC_BELOW_RECOMMENDED = Gauge(
    "ordo_control_topic_below_recommended",
    "1 while a control topic's setting (replication.factor, min.insync.replicas) is below what a "
    "cluster of 3+ brokers allows (3, 2), as checked when the operator first reached the cluster",
    ["topic", "setting"],
)
EXPANSION_UNDO_BLOCKED = Gauge(
    "ordo_expansion_undo_blocked",
    "1 while a deleted OrderedTopicExpansion's fence cannot be undone (its Kafka connection cannot be "
    "resolved): its finalizer stays, the epoch stays fencing",
    _EXPANSION,
)
TOPIC_PARTITIONS_OUTSIDE_EPOCHS = Gauge(
    "ordo_topic_partitions_outside_epochs",
    "Partitions of a topic ordo's producers write that no epoch covers (added outside ordo)",
    ["topic"],
)

_AUTOSCALER = ["resource_namespace", "autoscaler"]
AUTOSCALER_CURRENT_PARTITIONS = Gauge(
    "ordo_autoscaler_current_partitions", "Partitions of a TopicAutoscaler's topic now", _AUTOSCALER
)
AUTOSCALER_DESIRED_PARTITIONS = Gauge(
    "ordo_autoscaler_desired_partitions",
    "Partitions a TopicAutoscaler's measured load needs through its stabilization window (within "
    "min and max, never below the current count)",
    _AUTOSCALER,
)
AUTOSCALER_RECORDS_PER_SECOND = Gauge(
    "ordo_autoscaler_records_per_second",
    "Records (not offsets: transaction markers left out) per second written to a TopicAutoscaler's "
    "topic, as it last measured",
    _AUTOSCALER,
)
AUTOSCALER_DECISIONS = Counter(
    "ordo_autoscaler_decisions",
    "TopicAutoscaler decisions that changed something: grow (an expansion created), atMaximum and "
    "belowCapacity (load needs more than maxPartitions, or fits half the partitions: entered)",
    ["decision"],
)


def record_rebalance(namespace: str, group: str, duration: float, members: int, generation: int) -> None:
    """A ProducerGroup rebalance completed: called by the group handler once per generation."""
    REBALANCES.labels(namespace, group).inc()
    REBALANCE_SECONDS.labels(namespace, group).observe(duration)
    GROUP_MEMBERS.labels(namespace, group).set(members)
    GROUP_GENERATION.labels(namespace, group).set(generation)


def record_group_status(
    namespace: str, group: str, *, members: int, generation: int, unassigned: int, ready: bool
) -> None:
    """What a ProducerGroup's status says now: called whenever the handler writes it."""
    GROUP_MEMBERS.labels(namespace, group).set(members)
    GROUP_GENERATION.labels(namespace, group).set(generation)
    GROUP_UNASSIGNED.labels(namespace, group).set(unassigned)
    RESOURCE_READY.labels("ProducerGroup", namespace, group).set(1 if ready else 0)


def forget_group(namespace: str, group: str) -> None:
    """Drop a deleted group's series, so dashboards do not show it forever."""
    for metric in (REBALANCES, REBALANCE_SECONDS, GROUP_MEMBERS, GROUP_GENERATION, GROUP_UNASSIGNED):
        with contextlib.suppress(KeyError):  # never recorded by this process
            metric.remove(namespace, group)
    with contextlib.suppress(KeyError):
        RESOURCE_READY.remove("ProducerGroup", namespace, group)


def record_expansion_phase(namespace: str, expansion: str, phase: str, since: float) -> None:
    """An OrderedTopicExpansion is in ``phase`` since ``since`` (Unix time)."""
    for each in PHASES:
        EXPANSION_PHASE.labels(namespace, expansion, each).set(1 if each == phase else 0)
    EXPANSION_PHASE_SINCE.labels(namespace, expansion).set(since)
    RESOURCE_READY.labels("OrderedTopicExpansion", namespace, expansion).set(1 if phase == "Completed" else 0)


def forget_expansion(namespace: str, expansion: str) -> None:
    """Drop a deleted expansion's series (an Aborted or Failed one alerts until it is deleted)."""
    for each in PHASES:
        with contextlib.suppress(KeyError):
            EXPANSION_PHASE.remove(namespace, expansion, each)
    with contextlib.suppress(KeyError):
        EXPANSION_PHASE_SINCE.remove(namespace, expansion)
    with contextlib.suppress(KeyError):
        EXPANSION_UNDO_BLOCKED.remove(namespace, expansion)
    with contextlib.suppress(KeyError):
        RESOURCE_READY.remove("OrderedTopicExpansion", namespace, expansion)


def record_autoscaler(namespace: str, autoscaler: str, *, current: int, desired: int, records: float) -> None:
    """What a TopicAutoscaler measured and needs now: called after each measurement."""
    AUTOSCALER_CURRENT_PARTITIONS.labels(namespace, autoscaler).set(current)
    AUTOSCALER_DESIRED_PARTITIONS.labels(namespace, autoscaler).set(desired)
    AUTOSCALER_RECORDS_PER_SECOND.labels(namespace, autoscaler).set(records)


def record_autoscaler_decision(decision: str) -> None:
    AUTOSCALER_DECISIONS.labels(decision).inc()


def forget_autoscaler(namespace: str, autoscaler: str) -> None:
    """Drop a TopicAutoscaler's series once its daemon ends (deleted, or the operator stops)."""
    for metric in (
        AUTOSCALER_CURRENT_PARTITIONS,
        AUTOSCALER_DESIRED_PARTITIONS,
        AUTOSCALER_RECORDS_PER_SECOND,
    ):
        with contextlib.suppress(KeyError):
            metric.remove(namespace, autoscaler)


def record_fence(producers: int, wait_seconds: float) -> None:
    """All ``producers`` live producers acknowledged a fence after ``wait_seconds``."""
    PRODUCERS_FENCED.inc(producers)
    FENCE_WAIT_SECONDS.observe(wait_seconds)


class ExpansionTimer:
    """Observes how long one expansion stays in each phase, as its daemon moves through them, and
    (given the expansion's namespace and name) which phase it is in since when
    (``ordo_expansion_phase``, ``ordo_expansion_phase_since_seconds``).

    A restarted operator measures the interrupted phase from its restart: durations are this
    process's view.
    """

    def __init__(
        self,
        namespace: str | None = None,
        name: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._clock, self._wall = clock, wall
        self._resource = (namespace, name) if namespace is not None and name is not None else None
        self._phase: str | None = None
        self._since = 0.0

    def enter(self, phase: str) -> None:
        """The expansion is (still) in ``phase``; a change closes the previous phase's interval."""
        if phase == self._phase:
            return
        now = self._clock()
        if self._phase is not None:
            EXPANSION_PHASE_SECONDS.labels(self._phase).observe(now - self._since)
        self._phase, self._since = phase, now
        if self._resource is not None:
            record_expansion_phase(*self._resource, phase, self._wall())

    def finish(self, outcome: str) -> None:
        """The expansion ended in ``outcome`` (Completed, Aborted, Failed)."""
        self.enter(outcome)
        EXPANSIONS.labels(outcome).inc()


def error_kind(error: BaseException) -> str:
    """A bounded label for an error: which side failed, not the message."""
    module = type(error).__module__
    if module.startswith(("confluent_kafka", "cimpl")):  # cimpl: confluent-kafka's C extension
        return "kafka"
    if module.startswith("kubernetes"):
        return "kubernetes"
    if module.startswith("kopf"):
        return "kopf"
    if isinstance(error, TimeoutError):
        return "timeout"
    if isinstance(error, (ConnectionError, OSError)):
        return "connection"
    if isinstance(error, ValueError):
        return "invalid"
    return "internal"


def record_error(kind: str) -> None:
    OPERATOR_ERRORS.labels(kind).inc()


def count_errors(handler: Callable[P, R]) -> Callable[P, R]:
    """Wrap a kopf handler so every exception it raises is counted (and still raised for kopf)."""

    @functools.wraps(handler)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return handler(*args, **kwargs)
        except Exception as error:
            record_error(error_kind(error))
            raise

    return wrapper


def start_metrics_server(port: int, address: str = "0.0.0.0") -> int:
    """Serve ``/metrics`` on ``address:port`` from a daemon thread; returns the bound port
    (useful with port 0)."""
    server, _ = prometheus_client.start_http_server(port, addr=address)
    return int(server.server_port)
