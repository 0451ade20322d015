"""ordo on a real cluster: kind, Apache Kafka (KRaft), the images built from the repo and the Helm
chart. The scenarios are the testbed's (``ordo_sandbox.scenario``: the same workload programs and the same
independent verifiers); only the substrate differs. Runs with ``make e2e`` where Docker and kind
exist; skipped elsewhere (see conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from ordo_sandbox.scenario.sources import verify_sources
from ordo_sandbox.scenario.workload import Workload
from ordo_testbed.resources import Expansions, Groups
from ordo_testbed.waiting import wait_for

from .cluster import (
    APP_NAMESPACE,
    BOOTSTRAP_EXTERNAL,
    BOOTSTRAP_INTERNAL,
    OPERATOR_IMAGE,
    ORDO_NAMESPACE,
    ROOT,
    Cluster,
    build_image,
    create_cluster,
    delete_cluster,
    install_chart,
    install_kafka,
    run,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3600)]


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    with tempfile.TemporaryDirectory(prefix="ordo-e2e-") as directory:
        made = create_cluster(Path(directory))
        try:
            build_image(ROOT / "operator" / "Dockerfile", OPERATOR_IMAGE)
            install_kafka(made)
            install_chart(made, replicaCount=2, podDisruptionBudget={"enabled": True})
            yield made
        finally:
            if not os.environ.get("ORDO_E2E_KEEP"):
                delete_cluster()


def _create_topic(partitions: int, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP_EXTERNAL})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def test_every_image_builds(cluster: Cluster) -> None:
    """Every Dockerfile in the repository builds (the operator's is built by the fixture)."""
    listed = run("git", "-C", str(ROOT), "ls-files", "*Dockerfile", "*.Dockerfile").split()
    others = [ROOT / name for name in listed if ROOT / name != ROOT / "operator" / "Dockerfile"]
    for dockerfile in others:
        build_image(dockerfile, f"ordo-{dockerfile.parent.name.replace('_', '-')}:e2e")


def test_operator_is_ready_logs_json_and_serves_metrics(cluster: Cluster) -> None:
    assert cluster.deployment_ready(ORDO_NAMESPACE, "ordo")
    pods = cluster.core.list_namespaced_pod(ORDO_NAMESPACE, label_selector="app.kubernetes.io/name=ordo")
    for pod in pods.items:
        assert pod.metadata is not None and pod.metadata.name
        log = cluster.core.read_namespaced_pod_log(pod.metadata.name, ORDO_NAMESPACE)
        assert [json.loads(line) for line in log.splitlines() if line.strip()]
    text = cluster.core.connect_get_namespaced_service_proxy_with_path(
        "ordo-metrics:9090", ORDO_NAMESPACE, "metrics"
    )
    assert "ordo_producers_fenced_total" in text and "ordo_fence_wait_seconds_bucket" in text


def test_expansions_under_load_keep_every_key_in_order(cluster: Cluster, tmp_path: Path) -> None:
    topic = _create_topic(3, "orders-e2e")
    expansions = Expansions(cluster.custom, APP_NAMESPACE)
    workload = Workload(BOOTSTRAP_EXTERNAL, topic, tmp_path, producers=4, consumers=3, keys=1000, rate=250)
    try:
        workload.start()
        for partitions in (4, 6, 12):
            name = f"{topic}-to-{partitions}"
            expansions.create(name, topic, partitions, fenceTimeoutSeconds=60)
            expansions.wait_phase(name, "Completed", 180)
        workload.finish_producing(120)
    finally:
        verdict = workload.stop()
    assert verdict.order_violations == 0, verdict.examples
    assert verdict.lost == 0 and verdict.processed >= verdict.delivered


def _member_deployment(topic: str, group: str, records: int) -> dict[str, Any]:
    labels = {"app": group}
    restricted = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    argv = ["python", "-m", "ordo_sandbox.scenario.group_member", "--bootstrap", BOOTSTRAP_INTERNAL,
            "--topic", topic, "--records", str(records), "--batch", "10", "--rate", "5"]  # fmt: skip
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "ORDO_GROUP", "value": group},
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": group, "namespace": APP_NAMESPACE},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": "ordo-member",  # the chart's memberRbac
                    "containers": [
                        {
                            "name": "member",
                            "image": OPERATOR_IMAGE,
                            "imagePullPolicy": "Never",
                            "command": argv,
                            "env": env,
                            "securityContext": restricted,
                        }
                    ],
                },
            },
        },
    }


def test_producer_group_survives_a_deleted_member(cluster: Cluster) -> None:
    group, sources, records = "orders-cdc", 6, 300
    topic = _create_topic(sources, "orders-cdc-e2e")
    groups = Groups(cluster.custom, APP_NAMESPACE)
    groups.create(group, sources, {"app": group}, sessionTimeoutSeconds=10, exactlyOnce=True)
    deployment = _member_deployment(topic, group, records)
    cluster.apps.create_namespaced_deployment(APP_NAMESPACE, deployment)  # type: ignore[arg-type]
    before = groups.wait_settled(group, members=3, timeout=180, partitions=sources)

    # Delete a member that owns partitions mid-copy: its partitions move, and the new owner resumes
    # from the checkpoint committed with the data, so nothing is lost or written twice.
    victim = next(pod for pod, owned in groups.owners(group).items() if owned)
    at_choice = groups.checkpoints(group)

    def victim_committed() -> bool:
        # A checkpoint of a partition the victim owns, moved since it was chosen: the victim has
        # committed a unit (so its records are in the output the verdict reads).
        rows = groups.status(group).get("checkpoints") or []
        return any(
            row.get("owner") == victim
            and row.get("checkpoint") is not None
            and row["checkpoint"] != at_choice.get(row["partition"])
            for row in rows
        )

    wait_for(victim_committed, 120, f"a checkpoint committed by {victim}", step=1)
    generation = groups.status(group)["generation"]
    cluster.core.delete_namespaced_pod(victim, APP_NAMESPACE)

    def victim_gone() -> bool:
        status = groups.status(group)
        members = {m["pod"] for m in status.get("members") or []}
        return status.get("generation", 0) > generation and victim not in members

    wait_for(victim_gone, 180, f"a new generation without {victim}", step=1)
    after = groups.wait_settled(group, members=3, timeout=180, partitions=sources)
    assert victim not in groups.owners(group) and after["generation"] > before["generation"]

    def copied() -> Any:
        verdict = verify_sources(
            BOOTSTRAP_EXTERNAL, topic, dict.fromkeys(range(sources), records), timeout=60
        )
        return verdict if verdict.missing == 0 else None

    verdict = wait_for(copied, 300, "every source record copied", step=5)
    assert verdict.ok, verdict.summary() + f" {verdict.examples}"
    assert victim in verdict.members and len(verdict.members) >= 3


def test_the_sandbox_runs_on_the_cluster_with_its_operator(cluster: Cluster, tmp_path: Path) -> None:
    """``ordo sandbox --kubeconfig``: the installed operator serves the sandbox's group and
    expansion; the members run here, bound to placeholder Pods the cluster runs."""
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "ordo.cli", "sandbox", "--kubeconfig", str(cluster.kubeconfig),
         "--bootstrap", BOOTSTRAP_EXTERNAL, "--topic", "orders-e2e", "--duration", "30", "--no-spark",
         "--report", str(report)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0 and json.loads(report.read_text())["ok"], (
        done.stdout[-4000:] + done.stderr[-2000:]
    )
    assert f"the one installed in namespace {ORDO_NAMESPACE}" in done.stdout

    def namespaces() -> list[str]:
        return [str(n.metadata.name) for n in cluster.core.list_namespace().items if n.metadata]

    wait_for(lambda: "ordo-sandbox" not in namespaces(), 120, "the sandbox's namespace to go", step=2)
