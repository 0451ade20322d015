"""Observability: the operator's and the SDK's Prometheus metrics, the /metrics endpoint, JSON logs."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest
from prometheus_client import REGISTRY

from ordo import metrics as sdk_metrics
from ordo_operator import metrics


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_record_rebalance_sets_members_and_generation() -> None:
    before = _value("ordo_rebalances_total", resource_namespace="m1", group="orders")
    metrics.record_rebalance("m1", "orders", duration=0.4, members=3, generation=7)
    metrics.record_rebalance("m1", "orders", duration=1.2, members=2, generation=8)
    assert _value("ordo_rebalances_total", resource_namespace="m1", group="orders") == before + 2
    assert _value("ordo_group_members", resource_namespace="m1", group="orders") == 2
    assert _value("ordo_group_generation", resource_namespace="m1", group="orders") == 8
    assert _value(
        "ordo_rebalance_duration_seconds_sum", resource_namespace="m1", group="orders"
    ) == pytest.approx(1.6)
    metrics.forget_group("m1", "orders")
    metrics.forget_group("m1", "orders")  # twice is fine
    assert (
        REGISTRY.get_sample_value("ordo_group_members", {"resource_namespace": "m1", "group": "orders"})
        is None
    )


def test_expansion_timer_observes_each_phase_once() -> None:
    now = [100.0]
    timer = metrics.ExpansionTimer(clock=lambda: now[0])
    counts = {
        p: _value("ordo_expansion_phase_duration_seconds_count", phase=p) for p in ("Fencing", "Expanding")
    }
    sums = {p: _value("ordo_expansion_phase_duration_seconds_sum", phase=p) for p in ("Fencing", "Expanding")}
    completed = _value("ordo_expansions_total", outcome="Completed")
    timer.enter("Fencing")
    now[0] += 2.5
    timer.enter("Fencing")  # still fencing: nothing observed
    timer.enter("Expanding")
    now[0] += 0.25
    timer.finish("Completed")
    assert _value("ordo_expansion_phase_duration_seconds_count", phase="Fencing") == counts["Fencing"] + 1
    assert _value("ordo_expansion_phase_duration_seconds_sum", phase="Fencing") == sums["Fencing"] + 2.5
    assert _value("ordo_expansion_phase_duration_seconds_sum", phase="Expanding") == sums["Expanding"] + 0.25
    assert _value("ordo_expansions_total", outcome="Completed") == completed + 1


def test_group_status_gauges_unassigned_partitions_and_readiness() -> None:
    metrics.record_group_status("m3", "cdc", members=0, generation=4, unassigned=10, ready=False)
    assert _value("ordo_group_unassigned_partitions", resource_namespace="m3", group="cdc") == 10
    assert _value("ordo_group_members", resource_namespace="m3", group="cdc") == 0
    labels = {"kind": "ProducerGroup", "resource_namespace": "m3", "name": "cdc"}
    assert REGISTRY.get_sample_value("ordo_resource_ready", labels) == 0
    metrics.record_group_status("m3", "cdc", members=3, generation=5, unassigned=0, ready=True)
    assert REGISTRY.get_sample_value("ordo_resource_ready", labels) == 1
    assert _value("ordo_group_generation", resource_namespace="m3", group="cdc") == 5
    metrics.forget_group("m3", "cdc")
    assert REGISTRY.get_sample_value("ordo_resource_ready", labels) is None
    group = {"resource_namespace": "m3", "group": "cdc"}
    assert REGISTRY.get_sample_value("ordo_group_unassigned_partitions", group) is None


def test_an_expansion_shows_its_phase_and_since_when_while_in_it() -> None:
    """The phase histogram records a phase only when it ends; these gauges show a stuck one."""
    now, wall = [0.0], [1_800_000_000.0]
    timer = metrics.ExpansionTimer("m4", "grow", clock=lambda: now[0], wall=lambda: wall[0])
    which = {"resource_namespace": "m4", "expansion": "grow"}
    timer.enter("Fencing")
    phases = {
        p: REGISTRY.get_sample_value("ordo_expansion_phase", {**which, "phase": p}) for p in metrics.PHASES
    }
    assert phases == {p: 1.0 if p == "Fencing" else 0.0 for p in metrics.PHASES}
    assert REGISTRY.get_sample_value("ordo_expansion_phase_since_seconds", which) == 1_800_000_000.0
    now[0], wall[0] = 600.0, 1_800_000_600.0
    timer.enter("Fencing")  # still fencing, ten minutes on: since stays where the phase began
    assert REGISTRY.get_sample_value("ordo_expansion_phase_since_seconds", which) == 1_800_000_000.0
    timer.finish("Aborted")
    assert REGISTRY.get_sample_value("ordo_expansion_phase", {**which, "phase": "Aborted"}) == 1
    assert REGISTRY.get_sample_value("ordo_expansion_phase", {**which, "phase": "Fencing"}) == 0
    assert REGISTRY.get_sample_value("ordo_expansion_phase_since_seconds", which) == 1_800_000_600.0
    ready = {"kind": "OrderedTopicExpansion", "resource_namespace": "m4", "name": "grow"}
    assert REGISTRY.get_sample_value("ordo_resource_ready", ready) == 0
    metrics.record_expansion_phase("m4", "grow", "Completed", 1_800_000_700.0)
    assert REGISTRY.get_sample_value("ordo_resource_ready", ready) == 1
    metrics.forget_expansion("m4", "grow")
    metrics.forget_expansion("m4", "grow")  # twice is fine
    assert REGISTRY.get_sample_value("ordo_expansion_phase", {**which, "phase": "Completed"}) is None
    assert REGISTRY.get_sample_value("ordo_expansion_phase_since_seconds", which) is None


def test_fences_and_errors_are_counted() -> None:
    fenced, waits = _value("ordo_producers_fenced_total"), _value("ordo_fence_wait_seconds_count")
    metrics.record_fence(producers=4, wait_seconds=0.3)
    assert _value("ordo_producers_fenced_total") == fenced + 4
    assert _value("ordo_fence_wait_seconds_count") == waits + 1

    from confluent_kafka import KafkaException
    from kubernetes.client.exceptions import ApiException

    assert metrics.error_kind(KafkaException("x")) == "kafka"
    assert metrics.error_kind(ApiException(status=403)) == "kubernetes"
    assert metrics.error_kind(TimeoutError()) == "timeout"
    assert metrics.error_kind(KeyError("x")) == "internal"

    @metrics.count_errors
    def handler(*, fail: bool) -> str:
        if fail:
            raise ConnectionRefusedError("broker away")
        return "ok"

    before = _value("ordo_operator_errors_total", kind="connection")
    assert handler(fail=False) == "ok"
    with pytest.raises(ConnectionRefusedError):
        handler(fail=True)
    assert _value("ordo_operator_errors_total", kind="connection") == before + 1
    assert handler.__name__ == "handler"  # kopf names handlers after the function


def test_metrics_endpoint_serves_the_operator_metrics() -> None:
    port = metrics.start_metrics_server(0, "127.0.0.1")
    metrics.record_rebalance("m2", "cdc", duration=0.1, members=1, generation=1)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    assert 'ordo_group_generation{group="cdc",resource_namespace="m2"} 1.0' in text
    assert "ordo_expansion_phase_duration_seconds" in text and "ordo_operator_errors_total" in text


def test_sdk_metrics_api() -> None:
    assert sdk_metrics.AVAILABLE
    sdk_metrics.produce_blocked("orders", 0.2)
    sdk_metrics.gates_closed("orders", 3)
    sdk_metrics.gate_wait("orders", 0.05)
    sdk_metrics.async_in_flight("billing", 42)
    assert _value("ordo_produce_blocked_seconds_count", topic="orders") >= 1
    assert _value("ordo_gates_closed", topic="orders") == 3
    assert _value("ordo_gate_wait_seconds_count", topic="orders") >= 1
    assert _value("ordo_async_in_flight_records", group="billing") == 42
    sdk_metrics.gate_closed_since("orders", 1_800_000_000.0)
    assert _value("ordo_gate_closed_since_seconds", topic="orders") == 1_800_000_000.0
    sdk_metrics.gate_closed_since("orders", None)
    sdk_metrics.gate_closed_since("orders", None)  # twice is fine
    assert REGISTRY.get_sample_value("ordo_gate_closed_since_seconds", {"topic": "orders"}) is None


def test_sdk_metrics_are_no_ops_without_prometheus_client() -> None:
    program = (
        "import sys; sys.modules['prometheus_client'] = None\n"  # as if the extra were not installed
        "from ordo import metrics\n"
        "assert not metrics.AVAILABLE\n"
        "metrics.produce_blocked('t', 1.0); metrics.gates_closed('t', 1); metrics.gate_wait('t', 1.0)\n"
        "metrics.async_in_flight('g', 1); metrics.gate_closed_since('t', 1.0)\n"
        "assert metrics.serve(0) is None\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "ok", result.stderr


def test_the_health_probes_requests_are_logged_with_verbose_only() -> None:
    """aiohttp logs each request to the health endpoint at info, every few seconds of a pod's life."""
    program = (
        "import logging, sys\n"
        "from ordo_operator.logs import configure_logging\n"
        "configure_logging('text', verbose=sys.argv[1] == 'verbose')\n"
        "logging.getLogger('aiohttp.access').info('GET /healthz 200')\n"
    )
    for mode, shown in (("quiet", False), ("verbose", True)):
        result = subprocess.run(
            [sys.executable, "-c", program, mode], capture_output=True, text=True, timeout=60, check=True
        )
        assert ("GET /healthz 200" in result.stderr) == shown, (mode, result.stderr)


def test_json_logs_are_one_object_per_line() -> None:
    program = (
        "import logging\n"
        "from ordo_operator.logs import configure_logging\n"
        "configure_logging('json')\n"
        "logging.getLogger('ordo_operator.test').warning('fence acknowledged by %d producers', 3)\n"
        "logging.getLogger('ordo_operator.test').debug('not shown')\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    (line,) = result.stderr.strip().splitlines()
    entry = json.loads(line)
    assert entry["message"] == "fence acknowledged by 3 producers"
    assert entry["severity"] == "warn" and "timestamp" in entry
    with pytest.raises(ValueError, match="log format"):
        from ordo_operator.logs import configure_logging

        configure_logging("xml")
