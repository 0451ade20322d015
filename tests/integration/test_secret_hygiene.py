"""Kafka credentials come only from Secrets and never show up in status, Events or logs."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable

import pytest

from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions, Groups
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed


def test_a_planted_secret_never_leaves_the_secret(
    kafka: KafkaHandle, kube: Kube, operator_process: Callable[..., OperatorProcess]
) -> None:
    planted = f"planted-{uuid.uuid4().hex}"
    data = {"sasl.username": "ordo", "sasl.password": planted}
    kube.core.create_namespaced_secret(
        kube.namespace,
        {
            "metadata": {"name": "kafka-client"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
        },
    )
    operator = operator_process().start()
    connection = {"bootstrapServers": kafka.bootstrap, "secretRef": {"name": "kafka-client"}}
    topic = kafka.create_topic(2)
    groups, expansions = Groups(kube.custom, kube.namespace), Expansions(kube.custom, kube.namespace)
    groups.create("g", 2, {"app": "nobody"}, kafka=connection, checkpointTopic=kafka.topic("checkpoints"))
    expansions.create("grow", topic, 3, kafka=connection)
    expansions.wait_phase("grow", "Completed", 60)  # the operator connected with the Secret's settings
    wait_for(lambda: groups.status("g").get("conditions"), 30, "the group's conditions")
    wait_for(lambda: "NoMembers" in kube.event_reasons(), 15, "the group's Event")
    events = kube.core.list_namespaced_event(kube.namespace).items
    seen = "\n".join(
        [
            operator.log_text(),
            json.dumps(groups.get("g")),
            json.dumps(expansions.api.get_namespaced_custom_object(
                "ordo.dev", "v1alpha1", kube.namespace, expansions.plural, "grow"
            )),
            *(f"{e.reason} {e.message}" for e in events),
        ]
    )  # fmt: skip
    assert planted not in seen, "a Kafka credential leaked into logs, status or Events"
    assert "sasl.password" not in json.dumps(groups.get("g")), "not even the option's name"
