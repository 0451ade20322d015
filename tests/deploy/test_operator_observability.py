"""The running operator, as the chart starts it (metrics port and JSON logs from the environment):
an expansion on the testbed shows up in /metrics, and every log line is a JSON object."""

from __future__ import annotations

import json
import socket
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions
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
    for phase in ("Creating", "Fencing", "Expanding", "Publishing"):
        assert f'ordo_expansion_phase_duration_seconds_count{{phase="{phase}"}} 1.0' in text
    assert "ordo_fence_wait_seconds_count 1.0" in text  # no live producers: an immediate fence

    lines = [line for line in operator.log_text().splitlines() if line.strip()]
    assert lines
    entries = [json.loads(line) for line in lines]  # every line, kopf's included, is JSON
    assert any(e.get("object", {}).get("name") == "grow" for e in entries)
