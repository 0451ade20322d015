"""The operator's Kubernetes side beyond kopf: status writes from daemons, Secrets, connections."""

from __future__ import annotations

import base64
from typing import Any

import kubernetes
from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel

from ordo.api import API_GROUP, KafkaConnection
from ordo.api.common import VERSION
from ordo.connection import InvalidConnectionError, connection_config

from .config import OperatorConfig

__all__ = ["KafkaConnectionError", "api_client", "kafka_config", "patch_status", "status_patch"]

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


def patch_status(plural: str, namespace: str, name: str, status: BaseModel) -> None:
    """Merge-patch a custom resource's status subresource (daemons cannot wait for kopf's patch)
    with the fields of its status model that were set (``status_patch``)."""
    CustomObjectsApi(api_client()).patch_namespaced_custom_object_status(
        API_GROUP, VERSION, namespace, plural, name, {"status": status_patch(status)}
    )


def status_patch(status: BaseModel) -> dict[str, Any]:
    """A status model as its merge patch: camelCase, the fields set (read from the resource, given
    or assigned), none of them null."""
    return status.model_dump(by_alias=True, exclude_none=True, exclude_unset=True, mode="json")


def kafka_config(
    connection: KafkaConnection | None, namespace: str, settings: OperatorConfig
) -> dict[str, Any]:
    """librdkafka config for a resource: its ``spec.kafka`` (Strimzi's shape; its Secrets read
    from its namespace) or the operator's default (the chart mounts its Secrets). Raises
    KafkaConnectionError naming the field or Secret at fault."""
    try:
        if connection is None:
            if not settings.kafka_bootstrap:
                raise KafkaConnectionError(
                    "spec.kafka is not set and the operator has no default Kafka (ORDO_KAFKA_BOOTSTRAP)"
                )
            return settings.kafka_config()
        return connection_config(connection, lambda name: _secret_data(name, namespace))
    except InvalidConnectionError as error:
        where = f" (Secrets are read from the namespace {namespace!r})" if connection is not None else ""
        raise KafkaConnectionError(f"{error}{where}") from None


def _secret_data(name: str, namespace: str) -> dict[str, str] | None:
    """A Secret's data, decoded; None when there is no such Secret."""
    try:
        secret = CoreV1Api(api_client()).read_namespaced_secret(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return {key: base64.b64decode(value).decode() for key, value in (secret.data or {}).items()}
