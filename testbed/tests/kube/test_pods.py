"""Pods as processes: env and self-lookup, sigterm, sigkill, pause/resume, cleanup; and bound to
placeholder Pods, as on a real cluster."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiException

from ordo_testbed.kube.kubelet import PlaceholderKubelet
from ordo_testbed.pods import PLACEHOLDER_IMAGE, PodSet
from ordo_testbed.waiting import wait_for

PROGRAM = str(Path(__file__).parent / "pod_program.py")
# The tests of pods the testbed's own kubelet runs; the placeholder tests below say so by name.
pytestmark = pytest.mark.usefixtures("kube_server")


def ready(pod: Any) -> str:
    conditions = pod.read().status.conditions or []
    return next((c.status for c in conditions if c.type == "Ready"), "Unknown")


def gone(pod: Any) -> bool:
    try:
        pod.read()
    except ApiException as e:
        return bool(e.status == 404)
    return False


def proc_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def serving(pods: PodSet, tmp_path: Path, name: str = "member-0") -> Any:
    pod = pods.start(
        name, [sys.executable, PROGRAM, "serve", str(tmp_path / f"{name}.release")], labels={"app": "m"}
    )
    wait_for(lambda: "ready" in pod.stdout(), 30, "the pod program to start")
    return pod


def test_pod_reads_its_own_pod_through_its_env(pods: PodSet) -> None:
    pod = pods.start("reader", [sys.executable, PROGRAM, "read-label", "app"], labels={"app": "demo"})
    body = pod.read()
    assert body.status.pod_ip == "127.0.0.1" and body.spec.node_name
    assert pod.wait(60) == 0, pod.stderr()
    assert "label app=demo" in pod.stdout()
    wait_for(lambda: pod.read().status.phase == "Succeeded", what="phase Succeeded")
    assert ready(pod) == "False"


def test_pods_run_as_the_charts_member_service_account(pods: PodSet) -> None:
    """They may read their Pod (above) but not change it: the chart's member Role, enforced."""
    pod = pods.start("meddler", [sys.executable, PROGRAM, "annotate-self"])
    assert pod.wait(60) == 0, pod.stderr()
    assert pod.stdout().strip() == "refused 403"


def test_last_words_hold_each_pods_output_and_its_threads_stacks(pods: PodSet, tmp_path: Path) -> None:
    serving(pods, tmp_path)
    words = pods.last_words()
    assert words.startswith("--- pod member-0 (exit code None)") and "ready" in words
    assert "Current thread" in words and "in serve" in words  # the stack faulthandler wrote


def test_running_pod_is_ready(pods: PodSet, tmp_path: Path) -> None:
    pod = serving(pods, tmp_path)
    body = pod.read()
    assert body.status.phase == "Running" and ready(pod) == "True"
    assert body.status.container_statuses[0].container_id == f"process://{pod.pid}"


def test_sigterm_marks_terminating_then_removes_the_pod(pods: PodSet, tmp_path: Path) -> None:
    pod = serving(pods, tmp_path)
    pod.sigterm()
    wait_for(lambda: "got SIGTERM" in pod.stdout(), what="SIGTERM delivered")
    body = pod.read()
    assert body.metadata.deletion_timestamp is not None and ready(pod) == "False"
    (tmp_path / "member-0.release").touch()
    assert pod.wait(10) == 0
    wait_for(lambda: gone(pod), what="pod removed")


def test_deleting_the_pod_through_the_api_terminates_the_process(
    kube: Any, pods: PodSet, tmp_path: Path
) -> None:
    pod = serving(pods, tmp_path)
    kube.core.delete_namespaced_pod(pod.name, kube.namespace)  # as an operator or kubectl would
    wait_for(lambda: "got SIGTERM" in pod.stdout(), what="SIGTERM from the kubelet")
    assert ready(pod) == "False"
    (tmp_path / "member-0.release").touch()
    assert pod.wait(10) == 0
    wait_for(lambda: gone(pod), what="pod removed")

    forced = serving(pods, tmp_path, "forced")
    kube.core.delete_namespaced_pod(forced.name, kube.namespace, grace_period_seconds=0)
    assert forced.wait(10) == -9


def test_sigkill_leaves_a_failed_pod_or_deletes_it(pods: PodSet, tmp_path: Path) -> None:
    kept = serving(pods, tmp_path, "kept")
    kept.sigkill(delete=False)
    assert kept.returncode == -9
    body = kept.read()
    assert body.status.phase == "Failed" and ready(kept) == "False"
    removed = serving(pods, tmp_path, "removed")
    removed.sigkill()
    assert removed.returncode == -9
    wait_for(lambda: gone(removed), what="pod removed")


def test_pause_and_resume(pods: PodSet, tmp_path: Path) -> None:
    pod = serving(pods, tmp_path)
    pod.pause()
    wait_for(lambda: proc_state(pod.pid) == "T", what="process stopped")
    assert ready(pod) == "True"  # the kubelet does not notice
    pod.resume()
    wait_for(lambda: proc_state(pod.pid) != "T", what="process continued")


def test_exit_by_itself_fails_the_pod(pods: PodSet) -> None:
    pod = pods.start("crasher", [sys.executable, PROGRAM, "exit", "3"])
    assert pod.wait(30) == 3
    wait_for(lambda: pod.read().status.phase == "Failed", what="phase Failed")


def test_close_kills_every_process_it_started(kube: Any, kube_server: Any, tmp_path: Path) -> None:
    with PodSet(kube.kubeconfig_path, kube.namespace, log_dir=tmp_path) as podset:
        first = serving(podset, tmp_path, "a")
        second = serving(podset, tmp_path, "b")
        second.pause()
    assert first.returncode is not None and second.returncode is not None
    assert gone(first) and gone(second)


@pytest.mark.usefixtures("kube")
def test_logs_are_files(pods: PodSet) -> None:
    pod = pods.start(
        "printer", [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"]
    )
    assert pod.wait(30) == 0
    assert pod.stdout_path.read_text() == "out\n" and pod.stderr_path.read_text() == "err\n"


def test_a_placeholder_pod_runs_its_process_here_once_the_cluster_made_it_ready(
    kube: Any, tmp_path: Path
) -> None:
    with PodSet(
        kube.kubeconfig_path, kube.namespace, log_dir=tmp_path, placeholder_image=PLACEHOLDER_IMAGE
    ) as podset:
        unready = r"unscheduled \(registry.k8s.io/pause:3.10\) is not Ready after 1s: phase Pending"
        with pytest.raises(RuntimeError, match=unready):
            podset.ready_timeout = 1.0
            podset.start("unscheduled", [sys.executable, PROGRAM, "exit", "0"])
        assert gone(podset.pods[-1]) and podset.pods[-1].process is None  # nothing ran, nothing left
        podset.ready_timeout = 30.0
        with PlaceholderKubelet(kube.kubeconfig_path, kube.namespace):
            reader = podset.start(
                "reader", [sys.executable, PROGRAM, "read-label", "app"], labels={"app": "demo"}
            )
            body = reader.read()
            assert body.spec.containers[0].image == PLACEHOLDER_IMAGE and ready(reader) == "True"
            assert reader.wait(60) == 0 and "label app=demo" in reader.stdout(), reader.stderr()
            wait_for(lambda: gone(reader), what="the Pod of a process that exited to be deleted")

            killed, deleted = serving(podset, tmp_path, "killed"), serving(podset, tmp_path, "deleted")
            killed.sigkill()
            wait_for(lambda: gone(killed), what="the Pod of a killed process to be deleted")
            kube.core.delete_namespaced_pod("deleted", kube.namespace, grace_period_seconds=5)
            assert deleted.wait(30) is not None and gone(deleted)
