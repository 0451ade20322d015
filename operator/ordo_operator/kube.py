"""The operator's Kubernetes side beyond kopf: status writes from daemons, Secrets, connections."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import kubernetes
from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from ordo.api import API_GROUP, KafkaConnection
from ordo.api.common import VERSION

from .config import OperatorConfig

__all__ = ["KafkaConnectionError", "api_client", "kafka_config", "patch_status"]

_client: ApiClient | None = None


class KafkaConnectionError(ValueError):
    """The resource's Kafka connection cannot be resolved; the message says what to fix."""


def api_client() -> ApiClient:
    """One API client per process: in-cluster config in a pod, else the kubeconfig."""
    global _client
    if _client is None:
        try:
            kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
        except kubernetes.config.ConfigException:
            kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
        _client = ApiClient()
    return _client


def patch_status(plural: str, namespace: str, name: str, status: Mapping[str, Any]) -> None:
    """Merge-patch a custom resource's status subresource (daemons cannot wait for kopf's patch)."""
    CustomObjectsApi(api_client()).patch_namespaced_custom_object_status(
        API_GROUP, VERSION, namespace, plural, name, {"status": dict(status)}
    )


def kafka_config(
    connection: KafkaConnection | None, namespace: str, settings: OperatorConfig
) -> dict[str, Any]:
    """librdkafka config for a resource: its ``spec.kafka`` (with its Secret) or the operator's
    default. Raises KafkaConnectionError naming the field or Secret at fault."""
    if connection is None:
        if not settings.kafka_bootstrap:
            raise KafkaConnectionError(
                "spec.kafka is not set and the operator has no default Kafka (ORDO_KAFKA_BOOTSTRAP)"
            )
        return {"bootstrap.servers": settings.kafka_bootstrap, **settings.kafka_options}
    config: dict[str, Any] = {"bootstrap.servers": connection.bootstrap_servers, **connection.config}
    if connection.secret_ref is not None:
        name = connection.secret_ref.name
        try:
            secret = CoreV1Api(api_client()).read_namespaced_secret(name, namespace)
        except ApiException as error:
            if error.status == 404:
                raise KafkaConnectionError(
                    f"spec.kafka.secretRef: Secret {name!r} not found in {namespace!r}"
                ) from None
            raise
        for key, value in (secret.data or {}).items():
            config[key] = base64.b64decode(value).decode()
    return config
