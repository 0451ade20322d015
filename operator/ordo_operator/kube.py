"""The operator's Kubernetes side beyond kopf: status writes from daemons, Secrets, connections."""

from __future__ import annotations

import base64
import logging
import os
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import (
    ApiClient,
    CoreV1Api,
    CoreV1Event,
    CustomObjectsApi,
    V1EventSource,
    V1ObjectMeta,
    V1ObjectReference,
)
from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel

from ordo.api import API_GROUP, KafkaConnection
from ordo.api.common import VERSION
from ordo.connection import InvalidConnectionError, connection_config
from ordo.kube_credentials import kubernetes_client

from .config import OperatorConfig

__all__ = [
    "KafkaConnectionError",
    "api_client",
    "kafka_config",
    "namespace_terminating",
    "patch_status",
    "post_operator_event",
    "status_patch",
]

_client: ApiClient | None = None
_log = logging.getLogger(__name__)


class KafkaConnectionError(ValueError):
    """The resource's Kafka connection cannot be resolved; the message says what to fix."""


def api_client() -> ApiClient:
    """One API client per process: in-cluster config in a pod, else the kubeconfig."""
    global _client
    if _client is None:
        _client = kubernetes_client()
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


def namespace_terminating(namespace: str) -> bool:
    """Whether ``namespace`` is being deleted: the API server refuses new objects there (asked
    with a dry-run Event, which the operator may create anyway and which leaves nothing)."""
    probe = CoreV1Event(
        metadata=V1ObjectMeta(generate_name="ordo-probe.", namespace=namespace),
        involved_object=V1ObjectReference(api_version="v1", kind="Namespace", name=namespace),
        reason="Probe",
        message="whether the namespace takes new objects",
        type="Normal",
    )
    try:
        CoreV1Api(api_client()).create_namespaced_event(namespace, probe, dry_run="All")
    except ApiException as error:
        return error.status == 403 and "being terminated" in str(error.body or "")
    return False


def post_operator_event(reason: str, message: str, kind: str) -> None:
    """An Event on the operator's own pod (``POD_NAME``/``POD_NAMESPACE``, set by the chart), for
    what concerns no resource or one whose namespace takes no Events any more; nothing outside
    a pod. A failure is logged (the caller's log line said it already)."""
    pod, namespace = os.environ.get("POD_NAME"), os.environ.get("POD_NAMESPACE")
    if not pod or not namespace:
        return
    now = datetime.now(UTC)
    event = CoreV1Event(
        metadata=V1ObjectMeta(generate_name=f"{pod}.", namespace=namespace),
        involved_object=V1ObjectReference(api_version="v1", kind="Pod", name=pod, namespace=namespace),
        reason=reason,
        message=message[:1024],
        type=kind,
        first_timestamp=now,
        last_timestamp=now,
        count=1,
        source=V1EventSource(component="ordo-operator"),
        reporting_component="ordo-operator",
    )
    try:
        CoreV1Api(api_client()).create_namespaced_event(namespace, event)
    except Exception as error:
        _log.warning("event %s not posted: %s", reason, error)
