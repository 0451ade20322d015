"""``ordo sandbox`` end to end, short and without Spark: every stage happens while data flows, and
the independent verification finds nothing lost, duplicated or out of order. Once on the embedded
testbed, once in the real-cluster mode (``--kubeconfig``, ``--bootstrap``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from ordo_testbed.kafka import KafkaTestbed
from ordo_testbed.kube.fixtures import KubeCluster
from ordo_testbed.kube.kubelet import PlaceholderKubelet
from ordo_testbed.waiting import wait_for

SANDBOX_SECONDS = 600  # the sandbox's 20 s run, however long a loaded machine makes the rest
# each test: the sandbox's run, plus its own waits after it and its fixtures
pytestmark = [pytest.mark.testbed, pytest.mark.slow, pytest.mark.timeout(SANDBOX_SECONDS + 180)]


def _kill_processes_naming(marker: str) -> None:
    """SIGKILL every process of this machine whose command line contains ``marker``."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            named = marker.encode() in (proc / "cmdline").read_bytes()
        except OSError:
            continue  # ended meanwhile
        if named:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), signal.SIGKILL)


def _sandbox(tmp_path: Path, *options: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    report_path = tmp_path / "report.json"
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ordo.cli", "sandbox", "--duration", "20", "--no-spark",
             "--report", str(report_path), "--workdir", str(tmp_path / "run"), *options],
            capture_output=True, text=True, timeout=SANDBOX_SECONDS,
            env={**os.environ, "ORDO_SCENARIO_DEBUG": "1"},  # consumers report their offsets
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        # the sandbox is killed, but its testbed and members (pods: sessions of their own) would
        # run on: a loaded run once left them eating the CPU for an hour
        _kill_processes_naming(str(tmp_path))
        raise
    print(f"sandbox took {time.monotonic() - started:.1f}s\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}")
    assert report_path.exists(), done.stderr[-2000:]
    report = json.loads(report_path.read_text())
    failed = [c for c in report["checks"] if not c["ok"]]
    if failed:  # the workdir does not outlive CI: keep the consumers' last words in its log
        for err in sorted((tmp_path / "run").glob("consumer-*.err")):
            lines = [
                line for line in err.read_text(errors="replace").splitlines() if not line.startswith("%")
            ]
            print(f"--- {err.name}, last lines:", *lines[-8:], sep="\n")
    assert done.returncode == 0 and report["ok"], failed
    return done, report


def test_a_short_sandbox_run_holds_every_check(tmp_path: Path) -> None:
    done, report = _sandbox(tmp_path)
    assert report["orders"] > 1000
    assert report["kafka"]["records"] == report["orders"] and report["kafka"]["epochs"] == 2
    assert report["kafka"]["duplicates"] == report["kafka"]["missing"] == 0
    assert report["kafka"]["order_violations"] == 0
    assert report["consumers"]["lost"] == 0 and report["consumers"]["order_violations"] == 0
    assert report["consumers"]["processed"] >= report["orders"]

    stages = {s["step"]: s for s in report["stages"]}
    assert list(stages) == [
        "member added", "expansion completed", "member killed, its partitions moved", "member joined",
        "source writer stopped",
    ]  # fmt: skip
    assert all(s["seconds"] is not None for s in stages.values())
    # a member's rebalance is timed from its process's start, which is reported beside it
    assert all(stages[s]["pod_start"] > 0 for s in ("member added", "member joined"))
    assert "its process started in" in done.stdout
    assert "4 → 8" in stages["expansion completed"]["detail"]
    assert report["expansion_seconds"] is not None and report["expansion_seconds"] > 0
    killed = stages["member killed, its partitions moved"]["detail"]
    assert killed.startswith("SIGKILL orders-cdc-") and "→orders-cdc-" in killed
    assert "orders-cdc-4 got" in stages["member joined"]["detail"]
    assert "✓ every order in Kafka exactly once" in done.stdout


def test_the_real_cluster_mode_binds_members_to_placeholder_pods_and_cleans_up(
    tmp_path: Path, kube_cluster: KubeCluster, kafka_testbed: KafkaTestbed | None
) -> None:
    """``--kubeconfig`` and ``--bootstrap`` pointed at the testbed's API server and broker, with a
    stand-in kubelet making the placeholder Pods Ready as a cluster's would."""
    if kube_cluster.server is None or kafka_testbed is None:
        pytest.skip("the stand-in kubelet is for the testbed; on a real cluster, make e2e runs this mode")
    kubeconfig, topic = str(kube_cluster.kubeconfig_path), f"orders-{time.monotonic_ns()}"
    with PlaceholderKubelet(kubeconfig, "ordo-sandbox") as kubelet:
        done, report = _sandbox(
            tmp_path, "--kubeconfig", kubeconfig, "--bootstrap", kafka_testbed.bootstrap, "--topic", topic
        )
    assert report["kafka"]["records"] == report["orders"] > 1000 and report["kafka"]["epochs"] == 2
    assert "✓ every order in Kafka exactly once" in done.stdout
    # 3 members, 1 added, 1 joining: each bound to a placeholder Pod the stand-in kubelet ran
    assert kubelet.served == {f"{topic}-cdc-{i}" for i in range(5)}
    core = kubernetes.client.CoreV1Api(kube_cluster.client())

    def namespaces() -> list[str]:
        return [str(n.metadata.name) for n in core.list_namespace().items if n.metadata]

    wait_for(lambda: "ordo-sandbox" not in namespaces(), 30, "the namespace the sandbox created to go")
