"""The running operator, as the chart starts it (metrics port and JSON logs from the environment):
an expansion on the testbed shows up in /metrics, and every log line is a JSON object."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions, Groups
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return str(response.read().decode())
    except OSError:
        return None  # not listening yet


def _key(labels: dict[str, str]) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a /metrics page: (name, labels) -> value, as Prometheus parses it."""
    return {
        (sample.name, _key(sample.labels)): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_expansion_metrics_and_json_logs(
    kafka: KafkaHandle, kube: Kube, operator_process: Callable[..., OperatorProcess], tmp_path: Path
) -> None:
    port = _free_port()
    operator = operator_process(ORDO_METRICS_PORT=str(port), ORDO_LOG_FORMAT="json").start()
    topic = kafka.create_topic(2)
    expansions = Expansions(kube.custom, kube.namespace)
    expansions.create("grow", topic, 4)
    expansions.wait_phase("grow", "Completed", 60)

    def completed_counted() -> str | None:
        text = _scrape(port)
        return text if text and 'ordo_expansions_total{outcome="Completed"} 1.0' in text else None

    text = wait_for(completed_counted, 30, "the completed expansion in /metrics")
    assert text is not None
    for phase in ("Creating", "Fencing", "Publishing"):  # Expanding: a direct expansion's alone
        assert f'ordo_expansion_phase_duration_seconds_count{{phase="{phase}"}} 1.0' in text
    assert "ordo_fence_wait_seconds_count 1.0" in text  # no live producers: an immediate fence
    # the gauges the chart's alerts read: the phase the expansion is in (since when), readiness
    ns = kube.namespace
    found = _samples(text)
    which = {"resource_namespace": ns, "expansion": "grow"}
    phases = {
        p: found.get(("ordo_expansion_phase", _key({**which, "phase": p}))) for p in ("Completed", "Fencing")
    }
    assert phases == {"Completed": 1.0, "Fencing": 0.0}
    since = found[("ordo_expansion_phase_since_seconds", _key(which))]
    assert time.time() - 120 < since <= time.time()
    ready = {"kind": "OrderedTopicExpansion", "resource_namespace": ns, "name": "grow"}
    assert found[("ordo_resource_ready", _key(ready))] == 1.0

    # a group whose selector matches no pod: every source partition unassigned, not ready
    Groups(kube.custom, ns).create("idle", 4, {"app": "nobody"})
    group = {"resource_namespace": ns, "group": "idle"}

    def idle_group() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
        samples = _samples(_scrape(port) or "")
        return samples if samples.get(("ordo_group_unassigned_partitions", _key(group))) == 4.0 else None

    idle = wait_for(idle_group, 30, "the idle group's gauges")
    assert idle is not None
    assert idle[("ordo_group_members", _key(group))] == 0.0
    assert (
        idle[
            ("ordo_resource_ready", _key({"kind": "ProducerGroup", "resource_namespace": ns, "name": "idle"}))
        ]
        == 0.0
    )
    expansions.delete("grow")
    gone = ("ordo_expansion_phase", _key({**which, "phase": "Completed"}))
    wait_for(lambda: gone not in _samples(_scrape(port) or ""), 30, "the deleted expansion's series to go")

    lines = [line for line in operator.log_text().splitlines() if line.strip()]
    assert lines
    entries = [json.loads(line) for line in lines]  # every line, kopf's included, is JSON
    assert any(e.get("object", {}).get("name") == "grow" for e in entries)
