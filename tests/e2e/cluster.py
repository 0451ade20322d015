"""The e2e cluster: kind, ordo's images, a single-node Apache Kafka (KRaft) and the Helm chart.

Kafka has two listeners: ``kafka.kafka.svc:9092`` for pods, and ``127.0.0.1:30092`` for the test
process, through a NodePort that kind maps to the host. So the workload programs run as local
processes (the same ``ordo_sandbox.scenario.Workload`` as the testbed tests), while the operator and the
ProducerGroup members run in the cluster as they would in production.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes
import yaml

from ordo_testbed.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = os.environ.get("ORDO_E2E_CLUSTER", "ordo-e2e")
OPERATOR_IMAGE = "ordo-operator:e2e"
KAFKA_IMAGE = "apache/kafka:3.9.0"
KAFKA_NAMESPACE, ORDO_NAMESPACE, APP_NAMESPACE = "kafka", "ordo-system", "data"
EXTERNAL_PORT = 30092
BOOTSTRAP_EXTERNAL = f"127.0.0.1:{EXTERNAL_PORT}"
BOOTSTRAP_INTERNAL = f"kafka.{KAFKA_NAMESPACE}.svc:9092"

KIND_CONFIG = {
    "kind": "Cluster",
    "apiVersion": "kind.x-k8s.io/v1alpha4",
    "nodes": [
        {
            "role": "control-plane",
            "extraPortMappings": [
                {"containerPort": EXTERNAL_PORT, "hostPort": EXTERNAL_PORT, "listenAddress": "127.0.0.1"}
            ],
        }
    ],
}


def run(*argv: str, timeout: float = 900) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return result.stdout


@dataclass
class Cluster:
    kubeconfig: Path
    api: kubernetes.client.ApiClient

    @property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.api)

    @property
    def apps(self) -> kubernetes.client.AppsV1Api:
        return kubernetes.client.AppsV1Api(self.api)

    @property
    def custom(self) -> kubernetes.client.CustomObjectsApi:
        return kubernetes.client.CustomObjectsApi(self.api)

    def ensure_namespace(self, name: str) -> None:
        try:
            self.core.create_namespace({"metadata": {"name": name}})  # type: ignore[arg-type]
        except kubernetes.client.ApiException as error:
            if error.status != 409:
                raise

    def deployment_ready(self, namespace: str, name: str) -> bool:
        status = self.apps.read_namespaced_deployment_status(name, namespace).status
        return status is not None and bool(status.ready_replicas) and status.ready_replicas == status.replicas


def create_cluster(directory: Path) -> Cluster:
    """A kind cluster (reused when one of that name exists, e.g. with ORDO_E2E_KEEP=1)."""
    if CLUSTER not in run("kind", "get", "clusters").split():
        config = directory / "kind.yaml"
        config.write_text(yaml.safe_dump(KIND_CONFIG))
        run("kind", "create", "cluster", "--name", CLUSTER, "--config", str(config), "--wait", "180s")
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(run("kind", "get", "kubeconfig", "--name", CLUSTER))
    api = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    return Cluster(kubeconfig, api)


def delete_cluster() -> None:
    run("kind", "delete", "cluster", "--name", CLUSTER)


def build_image(dockerfile: Path, tag: str) -> None:
    """Build one of the repository's images (context: the repository root) and load it into kind."""
    run("docker", "build", "-f", str(dockerfile), "-t", tag, str(ROOT), timeout=1800)
    run("kind", "load", "docker-image", tag, "--name", CLUSTER)


def kafka_objects() -> list[dict[str, Any]]:
    labels = {"app": "kafka"}
    env = {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_LISTENERS": f"INTERNAL://:9092,EXTERNAL://:{EXTERNAL_PORT},CONTROLLER://:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"INTERNAL://{BOOTSTRAP_INTERNAL},EXTERNAL://{BOOTSTRAP_EXTERNAL}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "INTERNAL",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "250",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
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
                "spec": {
                    "containers": [
                        {
                            "name": "kafka",
                            "image": KAFKA_IMAGE,
                            "env": [{"name": k, "value": v} for k, v in env.items()],
                            "ports": [{"containerPort": 9092}, {"containerPort": EXTERNAL_PORT}],
                            "readinessProbe": {"tcpSocket": {"port": 9092}, "periodSeconds": 2},
                        }
                    ]
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kafka", "namespace": KAFKA_NAMESPACE},
        "spec": {
            "type": "NodePort",
            "selector": labels,
            "ports": [
                {"name": "internal", "port": 9092, "targetPort": 9092},
                {
                    "name": "external",
                    "port": EXTERNAL_PORT,
                    "targetPort": EXTERNAL_PORT,
                    "nodePort": EXTERNAL_PORT,
                },
            ],
        },
    }
    return [deployment, service]


def install_kafka(cluster: Cluster) -> None:
    cluster.ensure_namespace(KAFKA_NAMESPACE)
    for obj in kafka_objects():
        try:
            kubernetes.utils.create_from_dict(cluster.api, obj)  # type: ignore[no-untyped-call]
        except kubernetes.utils.FailToCreateError as error:
            if not all(e.status == 409 for e in error.api_exceptions):
                raise
    wait_for(lambda: cluster.deployment_ready(KAFKA_NAMESPACE, "kafka"), 300, "Kafka ready", step=2)

    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": BOOTSTRAP_EXTERNAL})
    wait_for(lambda: _reachable(admin), 120, f"Kafka at {BOOTSTRAP_EXTERNAL}", step=1)


def _reachable(admin: Any) -> bool:
    try:
        admin.list_topics(timeout=5)
        return True
    except Exception:
        return False


def install_chart(cluster: Cluster, **values: Any) -> None:
    """``helm install`` (Helm's Go SDK) of charts/ordo with the e2e image, waiting for readiness."""
    tag = OPERATOR_IMAGE.split(":")[1]
    chart_values = {
        "image": {"repository": OPERATOR_IMAGE.split(":")[0], "tag": tag, "pullPolicy": "Never"},
        "kafka": {"bootstrapServers": BOOTSTRAP_INTERNAL},
        "memberRbac": {"create": True, "namespaces": [APP_NAMESPACE]},
        **values,
    }
    cluster.ensure_namespace(APP_NAMESPACE)
    with helm.Config(kubeconfig_path=cluster.kubeconfig, namespace=ORDO_NAMESPACE) as config:
        config.install(
            ROOT / "charts" / "ordo",
            "ordo",
            chart_values,
            namespace=ORDO_NAMESPACE,
            create_namespace=True,
            wait="watcher",
            timeout=300,
        )
