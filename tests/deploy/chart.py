"""Rendering the chart with Helm's own engine (helm-python-sdk binds Helm's Go SDK; no helm binary)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ordo"
RELEASE, NAMESPACE = "ordo", "ordo-system"

# Value sets covering every switch of the chart: scopes, peering, optional objects (the monitoring
# bundle among them), the Kafka Secret.
VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "namespaced": {"rbac": {"scope": "namespace"}, "watchNamespaces": ["data", "billing"]},
    "namespaced-alone": {
        "rbac": {"scope": "namespace"},
        "watchNamespaces": ["data", "billing"],
        "userRbac": {"create": False},
    },
    "workloads": {"rbac": {"workloadNamespaces": ["data", "billing"]}},
    "ha": {
        "replicaCount": 3,
        "podDisruptionBudget": {"enabled": True},
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}},
    },
    "ha-namespaced": {"replicaCount": 2, "rbac": {"scope": "namespace"}},
    "kafka-secret": {
        "image": {"digest": "sha256:" + "ab" * 32},
        "kafka": {
            "options": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"},
            "secret": {
                "name": "kafka-client",
                "bootstrapServersKey": "bootstrap",
                "options": {"sasl.username": "username", "sasl.password": "password"},
            },
            "epochTopic": "ordo-epochs",
        },
        "logging": {"format": "text", "verbose": True},
    },
    # the default Kafka in Strimzi's shape: a KafkaUser's Secret and the cluster CA's, as they are
    "kafka-strimzi": {
        "kafka": {
            "bootstrapServers": "my-cluster-kafka-bootstrap.kafka:9093",
            "authentication": {
                "type": "scram-sha-512",
                "username": "ordo",
                "passwordSecret": {"secretName": "ordo", "password": "password"},
            },
            "tls": {
                "trustedCertificates": [{"secretName": "my-cluster-cluster-ca-cert", "certificate": "ca.crt"}]
            },
        },
    },
    "members": {"memberRbac": {"create": True, "namespaces": ["data", "billing"]}},
    "monitoring": {
        "metrics": {"serviceMonitor": {"enabled": True}},
        "monitoring": {
            "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
            "grafanaDashboard": {"enabled": True, "annotations": {"grafana_folder": "Kafka"}},
        },
    },
    "bare": {
        "metrics": {"enabled": False},
        "serviceAccount": {"create": False, "name": "platform-ops"},
        "rbac": {"create": False},
        "userRbac": {"create": False},
        "kafka": {"bootstrapServers": "kafka.kafka:9092"},
    },
}


@cache
def _rendered(name: str) -> tuple[tuple[str, str], ...]:
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(VALUE_SETS[name], name=RELEASE, namespace=NAMESPACE, is_install=True)
    return tuple(sorted(manifests.items()))


def render(name: str) -> list[dict[str, Any]]:
    """The objects the value set renders (templates only; CRDs come from ``chart_crds``)."""
    objects: list[dict[str, Any]] = []
    for template, text in _rendered(name):
        if template.endswith(".txt"):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def notes(name: str) -> str:
    return "".join(text for template, text in _rendered(name) if template.endswith("NOTES.txt"))


def chart_crds() -> dict[str, str]:
    """The chart's crds/ files as Helm loads them: file name -> text."""
    with helm.Chart.load(CHART) as chart:
        return {Path(crd["filename"]).name: crd["data"] for crd in chart.crds}


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def component(obj: dict[str, Any]) -> str:
    return str(obj["metadata"].get("labels", {}).get("app.kubernetes.io/component", ""))
