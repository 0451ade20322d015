"""Strimzi's KafkaTopic follows an expansion (spec.kafkaTopicRef), against Strimzi's own KafkaTopic
CRD (tests/deploy/strimzi/, Strimzi 1.2.0) on the testbed's kube-apiserver, the operator running
under the chart's RBAC: raised once the partitions exist, found later by a Completed expansion's
check, bad input and a missing KafkaTopic or CRD said in condition KafkaTopicInSync."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.apiserver import KubeApiServer
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed

CRD = Path(__file__).resolve().parents[1] / "deploy" / "strimzi" / "043-Crd-kafkatopic.yaml"
GROUP, VERSION, PLURAL = "kafka.strimzi.io", "v1", "kafkatopics"


def _condition(status: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == "KafkaTopicInSync"), {})


def test_kafka_topics_follow_expansions(
    kafka: KafkaHandle,
    kube: Kube,
    kube_server: KubeApiServer,
    operator_process: Callable[..., OperatorProcess],
) -> None:
    expansions, custom = Expansions(kube.custom, kube.namespace), kube.custom
    ext: Any = kubernetes.client.ApiextensionsV1Api(kube.api)
    crd = yaml.safe_load(CRD.read_text())
    installed = {c.metadata.name for c in ext.list_custom_resource_definition().items}
    had_crd = crd["metadata"]["name"] in installed
    early, good, other, missing = (kafka.create_topic(2) for _ in range(4))
    operator_process(ORDO_PARTITIONS_CHECK_SECONDS="1").start()  # Completed expansions checked each second

    def kafka_topic(name: str, topic: str, partitions: int) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "KafkaTopic",
            "metadata": {"name": name, "labels": {"strimzi.io/cluster": "my-cluster"}},
            "spec": {"topicName": topic, "partitions": partitions, "replicas": 1},
        }  # fmt: skip
        custom.create_namespaced_custom_object(GROUP, VERSION, kube.namespace, PLURAL, body)

    def declared(name: str) -> dict[str, Any]:
        return dict(custom.get_namespaced_custom_object(GROUP, VERSION, kube.namespace, PLURAL, name))

    def reason(name: str) -> str | None:
        return _condition(expansions.status(name)).get("reason")

    try:
        # before Strimzi is installed: the expansion grows the topic and says why nothing was raised
        expansions.create("early", early, 3, kafkaTopicRef={"name": "early-kt"})
        said = "KafkaTopicNotFound" if had_crd else "KafkaTopicCrdMissing"
        wait_for(lambda: reason("early") == said, 60, f"early: {said}", step=0.2)
        kube_server.apply_crds([crd])
        kafka_topic("early-kt", early, 2)  # created after the expansion: its check finds it behind
        kafka_topic("good-kt", good, 2)
        kafka_topic("other-kt", "someone-elses-topic", 2)
        before = declared("other-kt")["metadata"]["resourceVersion"]
        expansions.create("good", good, 4, kafkaTopicRef={"name": "good-kt", "namespace": kube.namespace})
        expansions.create("other", other, 3, kafkaTopicRef={"name": "other-kt"})
        expansions.create("missing", missing, 3, kafkaTopicRef={"name": "absent-kt"})
        expected = {
            "early": "KafkaTopicRaised", "good": "KafkaTopicRaised",
            "other": "KafkaTopicOfOtherTopic", "missing": "KafkaTopicNotFound",
        }  # fmt: skip

        def settled() -> bool:
            statuses = {name: expansions.status(name) for name in expected}
            return all(
                s.get("phase") == "Completed" and _condition(s).get("reason") == expected[name]
                for name, s in statuses.items()
            )

        wait_for(settled, 60, f"conditions {expected}", step=0.2)
        assert declared("early-kt")["spec"]["partitions"] == 3
        assert declared("good-kt")["spec"]["partitions"] == 4
        managers = {f["manager"] for f in declared("good-kt")["metadata"]["managedFields"]}
        assert "ordo-operator" in managers  # what GitOps tools can be told to leave alone
        in_sync = [_condition(expansions.status(n))["status"] for n in expected]
        assert in_sync == ["True", "True", "False", "False"]
        # bad input changes nothing: the other topic's KafkaTopic is as it was
        assert declared("other-kt")["metadata"]["resourceVersion"] == before
        assert declared("other-kt")["spec"]["partitions"] == 2
        assert "manages the topic 'someone-elses-topic'" in _condition(expansions.status("other"))["message"]
        wanted = {"KafkaTopicRaised", "KafkaTopicOfOtherTopic", "KafkaTopicNotFound"}
        wait_for(lambda: wanted <= set(kube.event_reasons()), 15, f"events {wanted}", step=0.2)
    finally:
        if not had_crd:  # the API server is the session's: leave it without Strimzi, as found
            ext.delete_custom_resource_definition(crd["metadata"]["name"])
