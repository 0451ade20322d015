"""An expansion's Strimzi KafkaTopic (``spec.kafkaTopicRef``) follows the partitions it created:
read the KafkaTopic, ask ``plan_kafka_topic``, merge-patch ``spec.partitions``, and say how it went
in the expansion's condition KafkaTopicInSync (with an Event when that changes)."""

from __future__ import annotations

import logging
from typing import Any, cast

import kopf
from kubernetes.client import CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from ordo.api import OrderedTopicExpansion, OrderedTopicExpansionStatus
from ordo.api.common import set_condition

from .config import OperatorConfig
from .kafka import KafkaSide, clients_for
from .kube import api_client, kafka_config, patch_status
from .plans.kafka_topic import (
    CONDITION,
    Follow,
    KafkaTopicView,
    Unreadable,
    plan_kafka_topic,
    worth_recording,
)

__all__ = ["STRIMZI_GROUP", "follow_completed", "follow_created", "follow_kafka_topic"]

STRIMZI_GROUP = "kafka.strimzi.io"
STRIMZI_VERSION = "v1"  # Strimzi 0.49 and later; 1.x serves only v1
KAFKA_TOPICS = "kafkatopics"
EXPANSIONS = "orderedtopicexpansions"
FIELD_MANAGER = "ordo-operator"  # owns spec.partitions after a raise: Argo CD's managedFieldsManagers
_log = logging.getLogger(__name__)


def follow_created(
    body: kopf.Body, resource: OrderedTopicExpansion, status: OrderedTopicExpansionStatus, side: KafkaSide
) -> OrderedTopicExpansionStatus:
    """After the expansion created its partitions: the status with KafkaTopicInSync as written."""
    if resource.spec.kafka_topic_ref is None:
        return status
    try:  # what Kafka's metadata shows, not what was asked for: raised only once they exist
        count = side.partition_count(resource.spec.topic)
    except Exception as error:  # Kafka unreachable now: the Completed expansion's timer tries again
        _log.warning("%s: partitions not read for its KafkaTopic: %s", resource.metadata.get("name"), error)
        return status
    return follow_kafka_topic(body, resource, status, count)


def follow_completed(settings: OperatorConfig, body: kopf.Body) -> None:
    """A Completed expansion's timer: a KafkaTopic found behind (created, changed or readable
    since) is raised."""
    resource = OrderedTopicExpansion.model_validate(dict(body))
    if resource.spec.kafka_topic_ref is None or resource.status is None:
        return
    namespace = str(resource.metadata.get("namespace", ""))
    try:
        side = clients_for(kafka_config(resource.spec.kafka, namespace, settings), settings)
    except Exception as error:  # its connection cannot be resolved now: the next check tries again
        _log.warning("%s/%s: KafkaTopic not checked: %s", namespace, resource.metadata.get("name"), error)
        return
    follow_created(body, resource, resource.status, side)


def follow_kafka_topic(
    body: kopf.Body,
    resource: OrderedTopicExpansion,
    status: OrderedTopicExpansionStatus,
    topic_partitions: int | None,
) -> OrderedTopicExpansionStatus:
    """Bring the expansion's KafkaTopic in step with ``status.to_partitions``, Kafka having
    ``topic_partitions`` now; the status as written (unchanged when there is nothing to do or the
    API server failed: a later pass tries again)."""
    ref, target = resource.spec.kafka_topic_ref, status.to_partitions
    if ref is None or target is None or topic_partitions is None:
        return status
    own_namespace = str(resource.metadata.get("namespace", ""))
    namespace = ref.namespace or own_namespace
    name = str(resource.metadata.get("name", ""))
    try:  # never in the expansion's way: a failure now is tried again by the next pass or check
        follow = _follow(namespace, ref.name, resource.spec.topic, target, topic_partitions)
        before = next(
            ((c.status == "True", c.message) for c in status.conditions if c.type == CONDITION), None
        )
        if not worth_recording(follow, before):
            return status
        generation = resource.metadata.get("generation")
        conditions = set_condition(
            status.conditions, CONDITION, follow.in_sync, follow.reason, follow.message, generation
        )
        patch_status(EXPANSIONS, own_namespace, name, OrderedTopicExpansionStatus(conditions=conditions))
    except Exception as error:  # the API server unreachable, a conflict that kept recurring, ...
        _log.warning(
            "%s/%s: KafkaTopic %s/%s not checked: %s", own_namespace, name, namespace, ref.name, error
        )
        return status
    kopf.event(
        body, type="Normal" if follow.in_sync else "Warning", reason=follow.reason, message=follow.message
    )
    if not follow.in_sync:
        _log.warning("%s/%s: %s", own_namespace, name, follow.message)
    return status.model_copy(update={"conditions": conditions})


def _follow(namespace: str, name: str, topic: str, target: int, topic_partitions: int) -> Follow:
    """Read, plan, patch; a KafkaTopic changed by someone else between the read and the patch
    (409: the patch names the resourceVersion read) is read again."""
    ref = f"{namespace}/{name}"
    for _ in range(3):
        found, detail, version = _read(namespace, name)
        follow = plan_kafka_topic(ref, topic, target, topic_partitions, found, detail)
        if follow.patch_partitions is None:
            return follow
        patch = {"metadata": {"resourceVersion": version}, "spec": {"partitions": follow.patch_partitions}}
        try:
            CustomObjectsApi(api_client()).patch_namespaced_custom_object(
                STRIMZI_GROUP,
                STRIMZI_VERSION,
                namespace,
                KAFKA_TOPICS,
                name,
                patch,
                field_manager=FIELD_MANAGER,
            )
        except ApiException as error:
            if error.status == 409:
                continue
            unreadable = _unreadable(error)
            if unreadable is None:
                raise
            return plan_kafka_topic(ref, topic, target, topic_partitions, unreadable, _said(error))
        return follow
    raise ApiException(status=409, reason=f"KafkaTopic {ref} kept changing while it was patched")


def _read(namespace: str, name: str) -> tuple[KafkaTopicView | Unreadable, str, str]:
    """The KafkaTopic as the plan sees it, the API server's words when unreadable, its resourceVersion."""
    try:
        found = cast(
            dict[str, Any],
            CustomObjectsApi(api_client()).get_namespaced_custom_object(
                STRIMZI_GROUP, STRIMZI_VERSION, namespace, KAFKA_TOPICS, name
            ),
        )
    except ApiException as error:
        unreadable = _unreadable(error)
        if unreadable is None:
            raise
        return unreadable, _said(error), ""
    meta, spec = found.get("metadata") or {}, found.get("spec") or {}
    view = KafkaTopicView(str(spec.get("topicName") or meta.get("name", "")), spec.get("partitions"))
    return view, "", str(meta.get("resourceVersion", ""))


def _unreadable(error: ApiException) -> Unreadable | None:
    if error.status == 403:
        return Unreadable.FORBIDDEN
    if error.status != 404:
        return None
    # a missing object is named in the 404's Status; a missing resource type is not
    said = str(error.body or "")
    return Unreadable.NOT_FOUND if f'"kind":"{KAFKA_TOPICS}"' in said.replace(" ", "") else Unreadable.NO_CRD


def _said(error: ApiException) -> str:
    return f"{error.status} {error.reason}"
