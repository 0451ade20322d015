"""The scenario programs as pods of the cluster: ProducerGroup members (a Deployment), and the
ordering workload's OrderedProducers and GatedConsumers (``PodWorkload``: the testbed's
``Workload`` with each program a pod instead of a local process).

The pods write their logs (what each producer delivered, what each consumer processed) into a
hostPath folder at the same path as on this host, the node's own disk, so the workload's
independent verifier reads them where the local processes would have written them.
"""

from __future__ import annotations

import signal
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import kubernetes

from ordo.member_wire import GROUP_LABEL
from ordo_sandbox.scenario.workload import Workload
from ordo_testbed.waiting import wait_for

from .cluster import Cluster
from .node import crictl_like_stop

RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
DOWNWARD = [
    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
]


def member_deployment(
    cluster: Cluster,
    namespace: str,
    group: str,
    topic: str,
    *,
    records: int,
    batch: int,
    rate: float,
    replicas: int,
) -> dict[str, Any]:
    """A Deployment of ProducerGroup members as an application writes one: the app image running
    GroupProducer, POD_NAME and POD_NAMESPACE from the downward API, ORDO_GROUP, the chart's
    member ServiceAccount, and the member label the operator's pod watch selects."""
    labels = {"app": group, GROUP_LABEL: group}
    argv = ["-m", "ordo_sandbox.scenario.group_member", "--bootstrap", cluster.bootstrap, "--topic", topic,
            "--records", str(records), "--batch", str(batch), "--rate", str(rate)]  # fmt: skip
    container = {
        "name": "member",
        "image": cluster.images.app,
        "imagePullPolicy": "Never",
        "args": argv,
        "env": [*DOWNWARD, {"name": "ORDO_GROUP", "value": group}],
        "securityContext": RESTRICTED,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": group, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": "ordo-member",  # the chart's memberRbac
                    "terminationGracePeriodSeconds": 30,
                    "containers": [container],
                },
            },
        },
    }


class PodProcess:
    """A workload program's pod, answering as the ``subprocess.Popen`` the Workload expects."""

    def __init__(self, cluster: Cluster, namespace: str, name: str) -> None:
        self.cluster, self.namespace, self.name = cluster, namespace, name
        self.args = name

    def _phase(self) -> str | None:
        try:
            status = self.cluster.core.read_namespaced_pod(self.name, self.namespace).status
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return status.phase if status else "Pending"

    def poll(self) -> int | None:
        return None if self._phase() in ("Pending", "Running") else 0

    def send_signal(self, sig: int) -> None:
        if sig == signal.SIGTERM:  # a graceful stop is the pod's deletion: the kubelet sends SIGTERM
            self.cluster.core.delete_namespaced_pod(self.name, self.namespace)
            return
        from .cluster import container_id
        from .node import ctr, run

        run(
            *ctr(
                "tasks",
                "kill",
                "--signal",
                signal.Signals(sig).name,
                container_id(self.cluster, self.namespace, self.name),
            )
        )

    def wait(self, timeout: float | None = None) -> int:
        """Until the program has exited (its pod Succeeded or Failed, or gone)."""
        try:
            wait_for(
                lambda: self._phase() in (None, "Succeeded", "Failed"),
                timeout or 600,
                f"pod {self.name}",
                step=0.5,
            )
        except AssertionError:
            raise subprocess.TimeoutExpired(self.name, timeout or 600) from None
        return 0

    def kill(self) -> None:
        crictl_like_stop(_container(self.cluster, self.namespace, self.name))


def _container(cluster: Cluster, namespace: str, pod: str) -> str:
    from .cluster import container_id

    return container_id(cluster, namespace, pod)


class PodWorkload(Workload):
    """``Workload`` whose producers and consumers are pods of the app image in ``namespace``."""

    def __init__(self, cluster: Cluster, namespace: str, topic: str, directory: Path, **options: Any) -> None:
        super().__init__(cluster.bootstrap, topic, directory, **options)
        directory.chmod(0o777)  # the programs run as uid 10001
        self.cluster, self.namespace = cluster, namespace

    def _spawn(self, program: str, argv: Any) -> Any:  # a pod, not a process
        self._spawned += 1
        name = f"{program}-{self._spawned}"
        container = {
            "name": program,
            "image": self.cluster.images.app,
            "imagePullPolicy": "Never",
            "args": ["-m", f"ordo_sandbox.scenario.{program}", *argv],
            "securityContext": RESTRICTED,
            "volumeMounts": [{"name": "out", "mountPath": str(self.directory)}],
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": f"workload-{self.topic}", "program": program}},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 90,  # a producer flushes for up to 60 s
                "containers": [container],
                "volumes": [{"name": "out", "hostPath": {"path": str(self.directory), "type": "Directory"}}],
            },
        }
        self.cluster.core.create_namespaced_pod(self.namespace, pod)  # type: ignore[arg-type]
        return PodProcess(self.cluster, self.namespace, name)

    def start_producers(self) -> PodWorkload:
        self.producers = self._ready([self._spawn("producer", argv) for argv in self._producer_argv])
        return self

    def start_consumers(self) -> PodWorkload:
        self.consumers = self._ready([self._spawn("consumer", argv) for argv in self._consumer_argv])
        return self

    def _ready(self, pods: list[Any]) -> list[Any]:
        """Each program's pod Running and its first line "ready" (what the local programs print)."""
        for pod in pods:
            try:
                wait_for(partial(self._said_ready, pod), 180, f"{pod.name} to say ready", step=0.5)
            except AssertionError as error:  # timed out (an ended pod's error has its log already)
                phase = pod._phase()
                if phase not in ("Pending", "Running"):
                    raise
                raise AssertionError(f"{error} (pod {phase}); its log:\n{self._log_tail(pod)}") from None
        return pods

    def _said_ready(self, pod: PodProcess) -> bool:
        phase = pod._phase()
        if phase in (None, "Succeeded", "Failed"):  # it will never say it: say why at once
            raise AssertionError(f"{pod.name} ended ({phase}) before it said ready:\n{self._log_tail(pod)}")
        if phase != "Running":
            return False
        return "ready" in self._log_tail(pod).split()

    def _log_tail(self, pod: PodProcess) -> str:
        try:
            return str(self.cluster.core.read_namespaced_pod_log(pod.name, self.namespace, tail_lines=40))
        except kubernetes.client.ApiException as error:
            return f"(no log: {error.reason})"
