"""Client-side Prometheus metrics for pods that use the SDK: a small API the SDK's classes call.

prometheus-client is an *optional* dependency (``pip install ordo[metrics]``): the SDK runs inside
users' producer and consumer pods, which may already export metrics another way (OpenTelemetry,
statsd) and should not get a second global registry and its import cost forced on them. Without
it, every function here is a cheap no-op, so callers never need to check.

Labels are bounded: a topic, a consumer group — never a key, a partition or an offset.
"""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import Any

__all__ = [
    "AVAILABLE",
    "async_in_flight",
    "gate_closed_since",
    "gate_wait",
    "gates_closed",
    "misplaced_records",
    "produce_blocked",
    "producer_renewed",
    "serve",
    "unknown_partitions",
]

prometheus_client: ModuleType | None
try:
    import prometheus_client
except ImportError:  # the optional extra is not installed: metrics are off
    prometheus_client = None

AVAILABLE = prometheus_client is not None

# Blocking spans a fence (sub-second) up to the producer's block timeout (a minute by default).
_WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

_metrics: dict[str, Any] = {}
if prometheus_client is not None:
    _metrics = {
        "blocked": prometheus_client.Histogram(
            "ordo_produce_blocked_seconds",
            "Time produce() waited because its topic was fenced by an expansion",
            ["topic"],
            buckets=_WAIT_BUCKETS,
        ),
        "gates": prometheus_client.Gauge(
            "ordo_gates_closed",
            "Partitions a gated consumer holds back until their prior partitions reach the thresholds",
            ["topic"],
        ),
        "gate_since": prometheus_client.Gauge(
            "ordo_gate_closed_since_seconds",
            "When (Unix time) the longest-closed gate of a topic closed in this consumer; no series "
            "while none is closed (ordo_gate_wait_seconds observes a gate only once it opens)",
            ["topic"],
        ),
        "gate_wait": prometheus_client.Histogram(
            "ordo_gate_wait_seconds",
            "From a gated consumer holding a partition to its gate opening",
            ["topic"],
            buckets=_WAIT_BUCKETS,
        ),
        "unknown": prometheus_client.Gauge(
            "ordo_gate_unknown_partitions",
            "Partitions a gated consumer holds because no epoch covers them: added to the topic "
            "outside ordo, after ordo expanded it",
            ["topic"],
        ),
        "misplaced": prometheus_client.Counter(
            "ordo_gate_misplaced_records",
            "Keyed records a gated reader found placed by an old partition count after their "
            "partition's threshold (raised, handed to on_misplaced, or delivered, by its policy)",
            ["topic"],
        ),
        "in_flight": prometheus_client.Gauge(
            "ordo_async_in_flight_records",
            "Records an AsyncConsumer handed out and not yet marked done",
            ["group"],
        ),
        "renewed": prometheus_client.Counter(
            "ordo_producer_fenced_total",
            "Times an OrderedProducer found itself fenced through the broker (its open transaction "
            "aborted, e.g. after a pause through an expansion) and reopened, sending its records again",
        ),
    }


def produce_blocked(topic: str, seconds: float) -> None:
    """A produce() call to ``topic`` was held ``seconds`` by a fence (call once per held call)."""
    if _metrics:
        _metrics["blocked"].labels(topic).observe(seconds)


def producer_renewed(producer_id: str) -> None:
    """A producer was fenced through the broker and reopened (``producer_id`` is not a label: logs
    name it)."""
    if _metrics:
        _metrics["renewed"].inc()


def gates_closed(topic: str, count: int) -> None:
    """``count`` partitions of ``topic`` are currently held behind a closed gate."""
    if _metrics:
        _metrics["gates"].labels(topic).set(count)


def gate_closed_since(topic: str, since: float | None) -> None:
    """The longest-closed gate of ``topic`` closed at ``since`` (Unix time); None: none is closed."""
    if not _metrics:
        return
    if since is None:
        with contextlib.suppress(KeyError):  # never closed in this process
            _metrics["gate_since"].remove(topic)
    else:
        _metrics["gate_since"].labels(topic).set(since)


def gate_wait(topic: str, seconds: float) -> None:
    """A gate on ``topic`` opened after holding its partition ``seconds``."""
    if _metrics:
        _metrics["gate_wait"].labels(topic).observe(seconds)


def unknown_partitions(topic: str, count: int) -> None:
    """``count`` partitions of ``topic`` are held because no epoch of its history covers them."""
    if _metrics:
        _metrics["unknown"].labels(topic).set(count)


def misplaced_records(topic: str, count: int) -> None:
    """A gated reader found ``count`` more misplaced records of ``topic``
    (``ordo_gate_misplaced_records_total``)."""
    if _metrics:
        _metrics["misplaced"].labels(topic).inc(count)


def async_in_flight(group: str, count: int) -> None:
    """An AsyncConsumer of ``group`` has ``count`` records handed out and not yet done."""
    if _metrics:
        _metrics["in_flight"].labels(group).set(count)


def serve(port: int, address: str = "0.0.0.0") -> int | None:
    """Serve ``/metrics`` from a daemon thread; returns the bound port, or None when
    prometheus-client is not installed (the pod then simply exports nothing)."""
    if prometheus_client is None:
        return None
    server, _ = prometheus_client.start_http_server(port, addr=address)
    return int(server.server_port)
