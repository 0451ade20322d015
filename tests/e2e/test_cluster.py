"""ordo on a real cluster: a kubelet running real containers (containerd, runc) beside the
testbed's control plane, the images built here, Apache Kafka in a pod, and the chart installed
with the real helm CLI as charts/ordo/README.md types it. The scenarios are the testbed's
(``ordo_sandbox.scenario``: the same programs and the same independent verifiers); only the
substrate differs. The tests run in this file's order on one cluster (``conftest.cluster``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from confluent_kafka.admin import AdminClient, NewTopic

from ordo.member_wire import GROUP_LABEL
from ordo_sandbox.scenario.sources import SourceVerdict, verify_sources
from ordo_testbed.kafka.testing import await_records
from ordo_testbed.resources import Autoscalers, Expansions, Groups
from ordo_testbed.waiting import wait_for

from .cluster import (
    APP_NAMESPACE,
    ORDO_NAMESPACE,
    ROOT,
    Cluster,
    container_id,
    container_pid,
    helm_status,
    process_rss_kib,
    restarts,
    upgrade_chart,
)
from .node import cache_dir, crictl_like_stop
from .steps import JOURNAL
from .workloads import PodWorkload, member_deployment

# The first test's time includes the cluster's set-up: every build on a fresh machine. CI's limit
# is 90 minutes for the whole run; a test that hangs fails within this.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2700)]
OPERATOR = "app.kubernetes.io/name=ordo,app.kubernetes.io/component=operator"


def _create_topic(cluster: Cluster, name: str, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)
    return name


def _operator_pods(cluster: Cluster) -> list[Any]:
    return cluster.pods(ORDO_NAMESPACE, OPERATOR)


# --- 1. the chart as installed ----------------------------------------------------------------------


def test_two_operator_replicas_peer_are_ready_log_json_and_serve_metrics(cluster: Cluster) -> None:
    assert "helm install" in cluster.installed[0] and "image.pullPolicy=Never" in cluster.installed[0]
    assert cluster.deployment_ready(ORDO_NAMESPACE, "ordo")
    pods = _operator_pods(cluster)
    assert len(pods) == 2 and all(p.status.phase == "Running" for p in pods)
    for pod in pods:
        spec = pod.spec.containers[0]
        assert spec.image == cluster.images.operator and any(a.startswith("--peering=") for a in spec.args)

    # kopf peering: both replicas write themselves into the peering object; the highest works
    def peers() -> Any:
        peering: Any = cluster.custom.get_cluster_custom_object(
            "kopf.dev", "v1", "clusterkopfpeerings", "ordo"
        )
        return peering if len(peering.get("status") or {}) == 2 else None

    peering = wait_for(peers, 60, "both replicas in the ClusterKopfPeering", step=1)
    assert set(peering["status"]) == {p.metadata.name for p in pods}, peering  # named after their pods
    for pod in pods:
        log = cluster.core.read_namespaced_pod_log(pod.metadata.name, ORDO_NAMESPACE)
        lines = [json.loads(line) for line in log.splitlines() if line.strip()]
        assert lines and all(isinstance(line, dict) for line in lines)
    text = cluster.core.connect_get_namespaced_service_proxy_with_path(
        "ordo-metrics:9090", ORDO_NAMESPACE, "metrics"
    )
    assert "ordo_producers_fenced_total" in text and "ordo_fence_wait_seconds_bucket" in text


def test_member_rbac_and_the_pdb_are_in_place(cluster: Cluster) -> None:
    member = f"system:serviceaccount:{APP_NAMESPACE}:ordo-member"
    allowed = {
        ("get", "pods"): "yes",
        ("watch", "pods"): "yes",
        ("update", "leases.coordination.k8s.io"): "yes",
        ("delete", "pods"): "no",
        ("get", "secrets"): "no",
    }
    for (verb, resource), answer in allowed.items():
        said = _can_i(cluster, verb, resource, member)
        assert said == answer, f"{member} {verb} {resource}: {said}"
    pdb = kubernetes.client.PolicyV1Api(cluster.api).read_namespaced_pod_disruption_budget(
        "ordo", ORDO_NAMESPACE
    )
    assert pdb.spec is not None and pdb.spec.max_unavailable == 1
    wait_for(lambda: _pdb_allows_one(cluster), 60, "the PDB to count 2 healthy replicas", step=1)


def _can_i(cluster: Cluster, verb: str, resource: str, user: str) -> str:
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={cluster.kubeconfig}", "auth", "can-i", verb, resource,
         "-n", APP_NAMESPACE, f"--as={user}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.stdout.strip()


def _pdb_allows_one(cluster: Cluster) -> bool:
    status = (
        kubernetes.client.PolicyV1Api(cluster.api)
        .read_namespaced_pod_disruption_budget("ordo", ORDO_NAMESPACE)
        .status
    )
    return status is not None and status.current_healthy == 2 and status.disruptions_allowed == 1


# --- 2. a ProducerGroup of real pods ----------------------------------------------------------------


def test_producer_group_of_real_pods_survives_a_deleted_pod_a_killed_container_and_a_new_pod(
    cluster: Cluster,
) -> None:
    group, sources, records = "orders-cdc", 6, 1500
    topic = _create_topic(cluster, "orders-cdc-e2e", sources)
    groups = Groups(cluster.custom, APP_NAMESPACE)
    groups.create(group, sources, {"app": group}, sessionTimeoutSeconds=10, exactlyOnce=True)
    deployment = member_deployment(
        cluster, APP_NAMESPACE, group, topic, records=records, batch=10, rate=2, replicas=3
    )
    cluster.apps.create_namespaced_deployment(APP_NAMESPACE, deployment)  # type: ignore[arg-type]
    groups.wait_settled(group, members=3, timeout=300, partitions=sources)
    lost: list[str] = []

    def committed_by(pod: str) -> None:
        """Wait until ``pod`` commits a unit (a checkpoint it owns moves): its records are in."""
        at_choice = groups.checkpoints(group)

        def moved() -> bool:
            rows = groups.status(group).get("checkpoints") or []
            return any(
                r.get("owner") == pod and r.get("checkpoint") not in (None, at_choice.get(r["partition"]))
                for r in rows
            )

        wait_for(moved, 180, f"a checkpoint committed by {pod}", step=1)

    def new_generation_without(pod: str, generation: int) -> None:
        def moved_on() -> bool:
            status = groups.status(group)
            members = {m["pod"] for m in status.get("members") or []}
            return status.get("generation", 0) > generation and pod not in members

        wait_for(moved_on, 240, f"a generation past {generation} without {pod}", step=1)

    # (a) a member pod deleted mid-copy: its partitions move; the Deployment makes a new pod
    victim = next(pod for pod, owned in groups.owners(group).items() if owned)
    committed_by(victim)
    generation = groups.status(group)["generation"]
    cluster.core.delete_namespaced_pod(victim, APP_NAMESPACE)
    new_generation_without(victim, generation)
    lost.append(victim)
    groups.wait_settled(group, members=3, timeout=300, partitions=sources)

    # (b) a member's container killed from the node (SIGKILL through containerd, no graceful stop):
    # the kubelet restarts it in the same pod; its session lapses and its partitions move
    target = next(pod for pod, owned in groups.owners(group).items() if owned)
    committed_by(target)
    generation, before = groups.status(group)["generation"], restarts(cluster, APP_NAMESPACE, target)
    crictl_like_stop(container_id(cluster, APP_NAMESPACE, target))
    wait_for(lambda: restarts(cluster, APP_NAMESPACE, target) > before, 120, f"{target} restarted", step=1)
    wait_for(lambda: groups.status(group).get("generation", 0) > generation, 240, "a new generation", step=1)
    groups.wait_settled(group, members=3, timeout=300, partitions=sources)

    # (c) a pod added by scaling the Deployment
    generation = groups.status(group)["generation"]
    cluster.apps.patch_namespaced_deployment_scale(group, APP_NAMESPACE, {"spec": {"replicas": 4}})
    wait_for(
        lambda: groups.status(group).get("generation", 0) > generation, 240, "a generation for 4", step=1
    )
    groups.wait_settled(group, members=4, timeout=300, partitions=sources)

    verdict = _copied(cluster, topic, sources, records)
    JOURNAL.verdict(f"ProducerGroup {group} (verify_sources)", verdict.summary())
    assert verdict.ok, verdict.summary() + f" {verdict.examples}"
    assert victim in verdict.members and target in verdict.members and len(verdict.members) >= 4


def _copied(cluster: Cluster, topic: str, sources: int, records: int) -> SourceVerdict:
    def done() -> SourceVerdict | None:
        verdict = verify_sources(cluster.bootstrap, topic, dict.fromkeys(range(sources), records), timeout=60)
        return verdict if verdict.missing == 0 else None

    found = wait_for(done, 900, "every source record copied", step=5)
    assert found is not None
    return found


# --- 3. an expansion under producer and consumer pods ---------------------------------------------------


@pytest.fixture
def work() -> Iterator[Path]:
    """The workload pods' hostPath: a folder of this test's own (pytest's tmp_path is pruned by
    other pytest sessions on a shared machine), on a path whose folders the image does not have
    (its /root is 0700 for the pods' uid)."""
    folder = Path(tempfile.mkdtemp(prefix="ordo-e2e-work-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_expansions_applied_with_kubectl_then_an_autoscaler_under_producer_and_consumer_pods(
    cluster: Cluster, work: Path
) -> None:
    """Producer and GatedConsumer pods on the kubelet throughout: two expansions applied with
    kubectl (3 -> 4 -> 6), then a TopicAutoscaler applied with kubectl grows the topic by itself
    (6 -> 12: 150 records/s is 25 a partition against a target of 10, and 12 is its maximum); the
    workload's verifier finds nothing lost and no key out of order."""
    topic = _create_topic(cluster, "orders-e2e", 3)
    workload = PodWorkload(cluster, APP_NAMESPACE, topic, work, producers=3, consumers=3, keys=600, rate=50)
    expansions = Expansions(cluster.custom, APP_NAMESPACE)
    try:
        workload.start()
        await_records(cluster.bootstrap, topic, 3, 1500, timeout=300)  # traffic before, between, after
        for partitions in (4, 6):
            name = f"{topic}-to-{partitions}"
            manifest = {
                "apiVersion": "ordo.dev/v1alpha1",
                "kind": "OrderedTopicExpansion",
                "metadata": {"name": name, "namespace": APP_NAMESPACE},
                "spec": {"topic": topic, "partitions": partitions, "fenceTimeoutSeconds": 60},
            }
            cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
            expansions.wait_phase(name, "Completed", 300)
            assert expansions.get(name)["metadata"]["finalizers"] == ["ordo.dev/finalizer"]
            await_records(cluster.bootstrap, topic, partitions, 1500, timeout=300)
        grown = _autoscale(cluster, topic)
        await_records(cluster.bootstrap, topic, 12, 1500, timeout=300)
        workload.finish_producing(300)
    finally:
        verdict = workload.stop()
        cluster.kubectl(
            "delete", "topicautoscaler", f"{topic}-auto", "-n", APP_NAMESPACE, "--ignore-not-found"
        )
    JOURNAL.verdict(f"TopicAutoscaler {topic} under pods (its decision)", grown)
    JOURNAL.verdict(
        f"OrderedTopicExpansion {topic} 3 -> 4 -> 6, then its TopicAutoscaler 6 -> 12 (workload verifier)",
        f"{verdict.delivered} delivered, {verdict.processed} processed, {verdict.lost} lost, "
        f"{verdict.order_violations} keys out of order",
    )
    assert verdict.order_violations == 0, verdict.examples
    assert verdict.lost == 0 and verdict.processed >= verdict.delivered >= 4500


def _autoscale(cluster: Cluster, topic: str) -> str:
    """Apply a TopicAutoscaler of ``topic`` (6 partitions, written at 150 records/s) with kubectl and
    wait until the expansion it creates took the topic to its maximum, 12; its decision's reason."""
    name = f"{topic}-auto"
    manifest = {
        "apiVersion": "ordo.dev/v1alpha1",
        "kind": "TopicAutoscaler",
        "metadata": {"name": name, "namespace": APP_NAMESPACE},
        "spec": {
            "topic": topic, "maxPartitions": 12, "targets": {"recordsPerSecondPerPartition": 10},
            "stabilizationWindowSeconds": 2, "cooldownSeconds": 2, "measureIntervalSeconds": 1,
        },
    }  # fmt: skip
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))

    autoscalers = Autoscalers(cluster.custom, APP_NAMESPACE)
    decision = wait_for(
        lambda: dict(autoscalers.status(name).get("lastDecision") or {}), 300, f"{name} to decide", step=1
    )
    assert (decision["fromPartitions"], decision["toPartitions"]) == (6, 12), decision
    expansion = Expansions(cluster.custom, APP_NAMESPACE).wait_phase(decision["expansion"], "Completed", 300)
    assert (expansion["fromPartitions"], expansion["toPartitions"]) == (6, 12), expansion
    return str(decision["reason"])


# --- 4. the operator's memory with 1,000 unrelated pods ---------------------------------------------------


def _leader_rss(cluster: Cluster) -> dict[str, int]:
    return {
        pod.metadata.name: process_rss_kib(
            container_pid(container_id(cluster, ORDO_NAMESPACE, pod.metadata.name))
        )
        for pod in _operator_pods(cluster)
    }


def _noise(cluster: Cluster, labels: dict[str, str], count: int) -> None:
    """``count`` pods that never run (scheduling-gated): they exist in the API only, as a busy
    cluster's other pods do for ordo."""
    body = {
        "metadata": {"generateName": "noise-", "labels": labels},
        "spec": {"schedulingGates": [{"name": "ordo.dev/never"}],
                 "containers": [{"name": "c", "image": cluster.images.app}]},
    }  # fmt: skip
    for _ in range(count):
        cluster.core.create_namespaced_pod("noise", body)  # type: ignore[arg-type]
    selector = ",".join(f"{k}={v}" for k, v in labels.items())
    wait_for(lambda: len(cluster.pods("noise", selector)) == count, 300, f"{count} pods {selector}", step=2)


def _operator_sees_the_present(cluster: Cluster, replicas: int) -> None:
    """A change the operator must act on, made now: once it has, its watches are past what came
    before (the pods just created)."""
    groups = Groups(cluster.custom, APP_NAMESPACE)
    generation = groups.status("orders-cdc")["generation"]
    cluster.apps.patch_namespaced_deployment_scale(
        "orders-cdc", APP_NAMESPACE, {"spec": {"replicas": replicas}}
    )
    wait_for(
        lambda: groups.status("orders-cdc").get("generation", 0) > generation, 240, "a new generation", step=1
    )
    groups.wait_settled("orders-cdc", members=replicas, timeout=300, partitions=6)


def test_the_operator_watches_only_member_pods_and_its_memory_ignores_1000_others(cluster: Cluster) -> None:
    cluster.ensure_namespace("noise")
    before = _leader_rss(cluster)
    _noise(cluster, {"app": "noise"}, 1000)
    _operator_sees_the_present(cluster, 3)
    unrelated = _leader_rss(cluster)
    # the control: 1,000 pods carrying the member label (in no group), which the operator's
    # watch does pass, as it passed every pod before the filter
    _noise(cluster, {"app": "noise-labelled", GROUP_LABEL: "none"}, 1000)
    _operator_sees_the_present(cluster, 4)
    labelled = _leader_rss(cluster)

    def mib(kib: int) -> str:
        return f"{kib / 1024:.1f}"

    JOURNAL.verdict(
        "operator memory (RSS, MiB) before / +1,000 unrelated pods / +1,000 pods with the member label",
        "; ".join(
            f"{pod}: {mib(before[pod])} / {mib(unrelated[pod])} / {mib(labelled[pod])}" for pod in before
        ),
    )
    grew_unrelated = max(unrelated[pod] - before[pod] for pod in before) / 1024
    grew_labelled = max(labelled[pod] - unrelated[pod] for pod in before) / 1024
    assert grew_unrelated < 8, grew_unrelated
    assert grew_labelled > grew_unrelated, (
        grew_labelled,
        grew_unrelated,
    )  # the measure sees pods it is given
    cluster.core.delete_collection_namespaced_pod("noise")
    wait_for(lambda: not cluster.pods("noise", ""), 300, "the 2,000 pods gone", step=2)


# --- 5. helm upgrade with a group running ---------------------------------------------------------------


@pytest.fixture
def ownership_watch(cluster: Cluster) -> Iterator[list[tuple[float, dict[int, str]]]]:
    """The owner of each partition of group "orders-live", read from its members' pods (the
    assignment annotation, what members act on) every half second while the test runs."""
    samples: list[tuple[float, dict[int, str]]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.5):
            owners: dict[int, str] = {}
            for pod in cluster.pods(APP_NAMESPACE, f"{GROUP_LABEL}=orders-live"):
                raw = (pod.metadata.annotations or {}).get("ordo.dev/assignment")
                if raw and pod.metadata.deletion_timestamp is None:
                    for partition in json.loads(raw).get("partitions", []):
                        owners[int(partition)] = pod.metadata.name
            samples.append((time.monotonic(), owners))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    yield samples
    stop.set()
    thread.join()


def test_helm_upgrade_to_a_new_image_with_a_group_running(
    cluster: Cluster, ownership_watch: list[tuple[float, dict[int, str]]]
) -> None:
    group, sources, records, session = "orders-live", 4, 900, 10
    topic = _create_topic(cluster, "orders-live-e2e", sources)
    groups = Groups(cluster.custom, APP_NAMESPACE)
    groups.create(group, sources, {"app": group}, sessionTimeoutSeconds=session, exactlyOnce=True)
    deployment = member_deployment(
        cluster, APP_NAMESPACE, group, topic, records=records, batch=10, rate=2, replicas=2
    )
    cluster.apps.create_namespaced_deployment(APP_NAMESPACE, deployment)  # type: ignore[arg-type]
    settled = groups.wait_settled(group, members=2, timeout=300, partitions=sources)
    began = time.monotonic()
    upgrade_chart(
        cluster, cluster.images.operator_next,
        "--set", "replicaCount=2", "--set", "podDisruptionBudget.enabled=true",
        "--set", "memberRbac.create=true", "--set", "memberRbac.namespaces={data}",
    )  # fmt: skip

    def upgraded() -> bool:
        pods = _operator_pods(cluster)
        images = {p.spec.containers[0].image for p in pods}
        return (
            len(pods) == 2
            and images == {cluster.images.operator_next}
            and cluster.deployment_ready(ORDO_NAMESPACE, "ordo")
        )

    wait_for(upgraded, 300, "both operator replicas on the new image", step=1)
    ended = time.monotonic()
    assert "REVISION: 2" in helm_status(cluster, "ordo", ORDO_NAMESPACE)
    # the group goes on under the new operator: no rebalance was needed, nothing waits
    after = groups.wait_settled(group, members=2, timeout=300, partitions=sources)
    assert after["generation"] == settled["generation"]
    during = [owners for at, owners in ownership_watch if began <= at <= ended + 5]
    longest = _longest_ownerless(ownership_watch, sources)
    JOURNAL.verdict(
        "helm upgrade with a group running",
        f"{len(during)} samples during the upgrade; longest time a partition had no owner {longest:.1f} s",
    )
    assert longest <= session, longest
    verdict = _copied(cluster, topic, sources, records)
    JOURNAL.verdict(f"ProducerGroup {group} across the upgrade (verify_sources)", verdict.summary())
    assert verdict.ok, verdict.summary() + f" {verdict.examples}"


def _longest_ownerless(samples: list[tuple[float, dict[int, str]]], partitions: int) -> float:
    longest, started = 0.0, False
    since: dict[int, float | None] = dict.fromkeys(range(partitions))
    for at, owners in samples:
        if len(owners) == partitions:
            started = True
        if not started:
            continue
        for p in range(partitions):
            if p in owners:
                since[p] = None
            else:
                first = since[p]
                if first is None:
                    since[p] = at
                else:
                    longest = max(longest, at - first)
    return longest


def _await_sandbox_namespace_gone(cluster: Cluster) -> None:
    def namespaces() -> set[str]:
        return {str(n.metadata.name) for n in cluster.core.list_namespace().items if n.metadata}

    wait_for(lambda: "ordo-sandbox" not in namespaces(), 300, "the sandbox's namespace to go", step=2)


def test_the_sandbox_runs_on_the_cluster_with_its_operator(cluster: Cluster, work: Path) -> None:
    """``ordo sandbox --kubeconfig``: the installed operator serves the sandbox's group and
    expansion; the members run here, bound to placeholder pods the kubelet runs."""
    report = work / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "ordo.cli", "sandbox", "--kubeconfig", str(cluster.kubeconfig),
         "--bootstrap", cluster.bootstrap, "--topic", "orders-sandbox", "--duration", "30", "--no-spark",
         "--pod-image", cluster.images.pause, "--report", str(report)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and json.loads(report.read_text())["ok"], (
        done.stdout[-4000:] + done.stderr[-2000:]
    )
    assert f"the one installed in namespace {ORDO_NAMESPACE}" in done.stdout
    JOURNAL.verdict("ordo sandbox --kubeconfig (its own verifier)", "ok")
    _await_sandbox_namespace_gone(cluster)


def test_the_autoscale_sandbox_grows_the_topic_by_itself_on_the_cluster(cluster: Cluster, work: Path) -> None:
    """``ordo sandbox --autoscale --kubeconfig``: the installed operator's TopicAutoscaler grows the
    topic 4 -> 8 -> 16 under a ramping load (tests/integration/test_sandbox_autoscale.py's sizes:
    200 -> 1,200 records/s at 100 per partition, a 3 s window and cooldown), the GatedConsumers
    read each growth's new partitions within 30 s of its decision, and the verifier finds nothing
    lost, doubled or out of order."""
    report_path = work / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "ordo.cli", "sandbox", "--autoscale", "--no-spark", "--kubeconfig",
         str(cluster.kubeconfig), "--bootstrap", cluster.bootstrap, "--topic", "orders-autoscale",
         "--workdir", str(work / "run"), "--report", str(report_path), "--duration", "20", "--hold", "25",
         "--rate-from", "200", "--rate-to", "1200", "--keys", "4000", "--target", "100", "--window", "3",
         "--cooldown", "3"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert report_path.exists(), done.stdout[-4000:] + done.stderr[-2000:]
    report = json.loads(report_path.read_text())
    failed = [c for c in report["checks"] if not c["ok"]]
    assert done.returncode == 0 and report["ok"], (failed, done.stdout[-4000:])
    assert f"the one installed in namespace {ORDO_NAMESPACE}" in done.stdout
    growths = report["growths"]
    assert [(g["from_partitions"], g["to_partitions"]) for g in growths] == [(4, 8), (8, 16)]
    assert report["partitions"] == [4, 16]
    for growth in growths:
        assert growth["completed_at"] > growth["decided_at"] > 0 and "records/s needs" in growth["reason"]
        assert 0 < growth["to_consumers_seconds"] <= 30, growth
    kafka, consumers = report["kafka"], report["consumers"]
    assert kafka["records"] == report["produced"] > 10_000 and kafka["epochs"] == 3
    assert kafka["duplicates"] == kafka["missing"] == kafka["order_violations"] == kafka["misplaced"] == 0
    assert consumers["lost"] == consumers["order_violations"] == 0
    delays = " and ".join(f"{g['to_consumers_seconds']} s" for g in growths)
    JOURNAL.verdict(
        "ordo sandbox --autoscale --kubeconfig 4 -> 8 -> 16 (its own verifier)",
        f"{kafka['records']:,} records, {consumers['lost']} lost, {consumers['order_violations']} keys "
        f"out of order; the consumers read each growth's new partitions {delays} after its decision",
    )
    _await_sandbox_namespace_gone(cluster)


# --- 6. uninstall in the documented order ------------------------------------------------------------------


def test_uninstall_in_the_documented_order_leaves_nothing_hanging(cluster: Cluster) -> None:
    """docs/operations.md "Uninstalling": ordo's resources first (the operator releases its
    finalizer), then ``helm uninstall``, then the namespaces, then the CRDs."""
    steps = _documented_uninstall()
    assert [s[:2] for s in steps] == [["kubectl", "delete"], ["helm", "uninstall"], ["kubectl", "delete"],
                                      ["kubectl", "delete"]], steps  # fmt: skip
    for argv in steps:
        if argv[0] == "helm":
            cluster.run_helm(argv, timeout=300)
        else:
            cluster.kubectl(*[_in_repository(w) for w in argv[1:]], timeout=600)

    def gone() -> bool:
        names = {n.metadata.name for n in cluster.core.list_namespace().items if n.metadata}
        return not names & {APP_NAMESPACE, ORDO_NAMESPACE}

    wait_for(gone, 300, "the namespaces gone", step=2)
    crds = [
        str(c.metadata.name)
        for c in kubernetes.client.ApiextensionsV1Api(cluster.api).list_custom_resource_definition().items
        if c.metadata
    ]
    assert not [c for c in crds if c.endswith("ordo.dev")], crds
    assert not helm_status(cluster, "ordo", ORDO_NAMESPACE)


def _documented_uninstall() -> list[list[str]]:
    import re
    import shlex

    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("## Uninstalling", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "docs/operations.md: no shell block under Uninstalling"
    return [shlex.split(line.split("  #")[0]) for line in block.group(1).splitlines() if line.strip()]


def _in_repository(word: str) -> str:
    return str(ROOT / word) if word in ("crds/", "crds") else word


def test_images_and_node_programs_are_cached_for_the_next_run(cluster: Cluster) -> None:
    """What a second run reuses: the images in Docker and the node's containerd, the binaries."""
    assert (cache_dir() / "containerd").is_dir()
    assert all(Path(p).exists() for p in [cache_dir() / "loaded"])
