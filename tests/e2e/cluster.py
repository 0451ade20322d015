"""The e2e cluster as the tests use it: the node (``node.py``), the images (``images.py``), Apache
Kafka in a pod, and the chart installed with the real ``helm`` CLI as charts/ordo/README.md types
it, plus the flags it documents for an image built on the cluster's own machine.

There is no cluster DNS: pods and this process reach Kafka through its Service's ClusterIP
(kube-proxy), and the broker advertises its pod's address, which this host reaches over the
bridge as the pods do. So the test process reads Kafka the way the pods write it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import yaml

from ordo_testbed.waiting import wait_for

from .images import Images
from .node import Node, run

ROOT = Path(__file__).resolve().parents[2]
KAFKA_NAMESPACE, ORDO_NAMESPACE, APP_NAMESPACE = "kafka", "ordo-system", "data"
CHART_README = ROOT / "charts" / "ordo" / "README.md"


@dataclass
class Cluster:
    node: Node
    images: Images
    api: kubernetes.client.ApiClient
    helm: Path
    bootstrap: str = ""
    """Kafka for pods and for this process alike: the Service's ClusterIP and port."""
    installed: list[str] = field(default_factory=list)
    """The helm command lines run, as run."""

    @property
    def kubeconfig(self) -> Path:
        return self.node.kubeconfig

    @property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.api)

    @property
    def apps(self) -> kubernetes.client.AppsV1Api:
        return kubernetes.client.AppsV1Api(self.api)

    @property
    def custom(self) -> kubernetes.client.CustomObjectsApi:
        return kubernetes.client.CustomObjectsApi(self.api)

    def kubectl(self, *argv: str, input: str | None = None, timeout: float = 300) -> str:
        return run("kubectl", f"--kubeconfig={self.kubeconfig}", *argv, timeout=timeout,
                   input=input.encode() if input is not None else None)  # fmt: skip

    def run_helm(self, argv: list[str], timeout: float = 600) -> str:
        """A helm command line (``argv[0] == "helm"``) with the real helm CLI and this kubeconfig."""
        assert argv[0] == "helm", argv
        self.installed.append(shlex.join(argv))
        return run(self.helm, *argv[1:], f"--kubeconfig={self.kubeconfig}", timeout=timeout)

    def ensure_namespace(self, name: str) -> None:
        try:
            self.core.create_namespace({"metadata": {"name": name}})  # type: ignore[arg-type]
        except kubernetes.client.ApiException as error:
            if error.status != 409:
                raise

    def deployment_ready(self, namespace: str, name: str) -> bool:
        status = self.apps.read_namespaced_deployment_status(name, namespace).status
        return (
            status is not None
            and bool(status.ready_replicas)
            and status.ready_replicas == status.replicas
            and status.updated_replicas == status.replicas
        )

    def pods(self, namespace: str, selector: str) -> list[Any]:
        return list(self.core.list_namespaced_pod(namespace, label_selector=selector).items)


def connect(node: Node, images: Images, helm: Path) -> Cluster:
    api = kubernetes.config.new_client_from_config(config_file=str(node.kubeconfig))  # type: ignore[no-untyped-call]
    return Cluster(node, images, api, helm)


# --- Kafka ------------------------------------------------------------------------------------------


def kafka_objects(image: str) -> list[dict[str, Any]]:
    labels = {"app": "kafka"}
    container = {
        "name": "kafka",
        "image": image,
        "imagePullPolicy": "Never",
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"containerPort": 9092, "name": "client"}],
        "readinessProbe": {"tcpSocket": {"port": 9092}, "periodSeconds": 2},
        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/kafka"}],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "kafka", "namespace": KAFKA_NAMESPACE},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [container], "volumes": [{"name": "data", "emptyDir": {}}]},
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kafka", "namespace": KAFKA_NAMESPACE},
        "spec": {"selector": labels, "ports": [{"name": "client", "port": 9092, "targetPort": 9092}]},
    }
    return [deployment, service]


def install_kafka(cluster: Cluster) -> str:
    """Kafka's Deployment and Service; returns the bootstrap (ClusterIP:9092) once a client
    through it lists the broker."""
    cluster.ensure_namespace(KAFKA_NAMESPACE)
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(kafka_objects(cluster.images.kafka)))
    wait_for(lambda: cluster.deployment_ready(KAFKA_NAMESPACE, "kafka"), 300, "Kafka's pod Ready", step=1)
    service = cluster.core.read_namespaced_service("kafka", KAFKA_NAMESPACE)
    assert service.spec is not None and service.spec.cluster_ip
    bootstrap = f"{service.spec.cluster_ip}:9092"

    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_for(lambda: _reachable(admin), 120, f"Kafka at {bootstrap}", step=1)
    cluster.bootstrap = bootstrap
    return bootstrap


def _reachable(admin: Any) -> bool:
    try:
        return bool(admin.list_topics(timeout=5).brokers)
    except Exception:
        return False


# --- the chart ---------------------------------------------------------------------------------------


def documented_install() -> list[str]:
    """The ``helm install`` of charts/ordo/README.md's first shell block, as a shell splits it."""
    return _documented(r"^helm install ")


def documented_local_image_flags() -> list[str]:
    """The flags charts/ordo/README.md gives for an image built on the cluster's machine (its
    "Images" section's ``helm install``, less the words of the plain install)."""
    local = _documented(r"^helm install .*image\.pullPolicy=Never")
    plain = documented_install()
    assert local[: len(plain)] == plain, f"{local} does not extend the plain install {plain}"
    return local[len(plain) :]


def _documented(pattern: str) -> list[str]:
    text = CHART_README.read_text()
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            command = line.split("  #")[0].strip()
            if re.search(pattern, command):
                return shlex.split(command)
    raise AssertionError(f"charts/ordo/README.md shows no command matching {pattern}")


def install_chart(cluster: Cluster, image: str, *more: str) -> str:
    """``kubectl apply -f crds/`` and the README's ``helm install``, with the documented local-image
    flags (the image's repository and tag) and ``more`` flags, waiting for the rollout."""
    cluster.kubectl("apply", "-f", str(ROOT / "crds"))
    repository, _, tag = image.partition(":")
    argv = [*documented_install(), *documented_local_image_flags()]
    argv += ["--set", f"image.repository={repository}", "--set", f"image.tag={tag}"]
    argv += ["--set", f"kafka.bootstrapServers={cluster.bootstrap}", *more, "--wait", "--timeout", "5m"]
    return cluster.run_helm(_in_repository(argv))


def upgrade_chart(cluster: Cluster, image: str, *more: str) -> str:
    repository, _, tag = image.partition(":")
    install = [*documented_install(), *documented_local_image_flags()]
    argv = ["helm", "upgrade", *[w for w in install[2:] if w != "--create-namespace"]]
    argv += ["--set", f"image.repository={repository}", "--set", f"image.tag={tag}"]
    argv += ["--set", f"kafka.bootstrapServers={cluster.bootstrap}", *more, "--wait", "--timeout", "5m"]
    return cluster.run_helm(_in_repository(argv))


def _in_repository(argv: list[str]) -> list[str]:
    """The chart path as the README types it (``charts/ordo``), from the repository's root."""
    return [str(ROOT / word) if word == "charts/ordo" else word for word in argv]


def container_id(cluster: Cluster, namespace: str, pod: str) -> str:
    status = cluster.core.read_namespaced_pod(pod, namespace).status
    assert status is not None and status.container_statuses
    found: str = status.container_statuses[0].container_id or ""
    assert found.startswith("containerd://"), found
    return found.removeprefix("containerd://")


def restarts(cluster: Cluster, namespace: str, pod: str) -> int:
    status = cluster.core.read_namespaced_pod(pod, namespace).status
    return sum(c.restart_count for c in (status.container_statuses or [])) if status else 0


def process_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def container_pid(container: str) -> int:
    from .node import ctr

    out = run(*ctr("tasks", "ls"))
    for line in out.splitlines()[1:]:
        words = line.split()
        if words and words[0] == container:
            return int(words[1])
    raise AssertionError(f"no task {container}")


def helm_status(cluster: Cluster, release: str, namespace: str) -> str:
    done = subprocess.run(
        [str(cluster.helm), "status", release, "-n", namespace, f"--kubeconfig={cluster.kubeconfig}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.stdout if done.returncode == 0 else ""
