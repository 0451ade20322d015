"""docs/strimzi.md: every YAML it shows is valid: Strimzi's KafkaTopic and KafkaUser against
Strimzi's own CRD schemas (tests/deploy/strimzi/, Strimzi 1.2.0), with unknown fields refused as
``kubectl apply`` refuses them; ordo's resources against ordo's CRDs and models; Argo CD's and
KEDA's against the fields their documentation lists. And what it says
matches ordo: its control topics as ordo makes them, the ACLs of docs/security.md."""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from ordo.api import RESOURCES
from ordo.api.common import Resource
from ordo.api.crd import crd_manifest
from ordo.connection import librdkafka_config
from ordo.control_topics import DEFAULT_CHECKPOINT_TOPIC, DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC

from .chart import ROOT

DOC = ROOT / "docs" / "strimzi.md"
STRIMZI = Path(__file__).with_name("strimzi")
_YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.S | re.M)


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown fields refused wherever it lists the fields (kubectl's strict field
    validation), except where it keeps unknown ones (x-kubernetes-preserve-unknown-fields)."""
    schema = copy.deepcopy(schema)

    def walk(node: dict[str, Any]) -> None:
        if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            node.setdefault("additionalProperties", False)
        for child in (node.get("properties") or {}).values():
            walk(child)
        if isinstance(node.get("items"), dict):
            walk(node["items"])

    walk(schema)
    schema["properties"]["metadata"] = {"type": "object"}  # ObjectMeta: the API server's own
    return schema


def _object(*required: str, **properties: Any) -> dict[str, Any]:
    """A JSON schema of an object with these fields and no other."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


STRING, INTEGER, BOOLEAN = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
STRINGS = {"type": "array", "items": STRING}
# Other tools' resources the page shows (their CRDs are not vendored): the fields their documentation
# lists, unknown ones refused. KEDA's Kafka scaler takes its settings as strings only.
KEDA_KAFKA_FIELDS = (
    "bootstrapServers", "consumerGroup", "topic", "lagThreshold", "activationLagThreshold",
    "offsetResetPolicy", "allowIdleConsumers", "scaleToZeroOnInvalidOffset", "excludePersistentLag",
    "limitToPartitionsWithLag", "version", "partitionLimitation", "sasl", "tls", "unsafeSsl",
)  # fmt: skip
_KEDA_TRIGGER = _object(
    "type",
    "metadata",
    type={"const": "kafka"},
    metadata=_object(**dict.fromkeys(KEDA_KAFKA_FIELDS, STRING)),
    authenticationRef=_object("name", name=STRING, kind=STRING),
)
_OTHER_TOOLS: dict[tuple[str, str], dict[str, Any]] = {
    ("keda.sh/v1alpha1", "ScaledObject"): _object(
        "scaleTargetRef",
        "triggers",
        scaleTargetRef=_object("name", name=STRING, apiVersion=STRING, kind=STRING),
        pollingInterval=INTEGER,
        cooldownPeriod=INTEGER,
        minReplicaCount=INTEGER,
        maxReplicaCount=INTEGER,
        triggers={"type": "array", "items": _KEDA_TRIGGER},
    ),
    ("argoproj.io/v1alpha1", "Application"): _object(
        "project",
        "source",
        "destination",
        project=STRING,
        source=_object("repoURL", repoURL=STRING, targetRevision=STRING, path=STRING, chart=STRING),
        destination=_object(server=STRING, namespace=STRING, name=STRING),
        syncPolicy=_object(
            automated=_object(prune=BOOLEAN, selfHeal=BOOLEAN, allowEmpty=BOOLEAN),
            syncOptions={"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z]+=[a-z]+$"}},
        ),
        ignoreDifferences={
            "type": "array",
            "items": _object(
                "kind",
                group=STRING,
                kind=STRING,
                name=STRING,
                namespace=STRING,
                jsonPointers=STRINGS,
                jqPathExpressions=STRINGS,
                managedFieldsManagers=STRINGS,
            ),
        },
    ),
}


@cache
def _schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> strict openAPIV3Schema, for Strimzi's two CRDs, ordo's and the others'."""
    crds = [yaml.safe_load(p.read_text()) for p in sorted(STRIMZI.glob("*.yaml"))]
    crds += [crd_manifest(model) for model in RESOURCES]
    schemas = {}
    for crd in crds:
        for version in crd["spec"]["versions"]:
            if version["served"]:
                api_version = f"{crd['spec']['group']}/{version['name']}"
                schemas[api_version, crd["spec"]["names"]["kind"]] = _strict(
                    version["schema"]["openAPIV3Schema"]
                )
    for key, spec in _OTHER_TOOLS.items():
        header = {"apiVersion": STRING, "kind": STRING, "metadata": {"type": "object"}}
        schemas[key] = _object("apiVersion", "kind", "metadata", "spec", **header, spec=spec)
    return schemas


def _documents() -> list[dict[str, Any]]:
    return [d for block in _YAML_BLOCK.findall(DOC.read_text()) for d in yaml.safe_load_all(block) if d]


def _of_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in _documents() if d["kind"] == kind]


def test_the_vendored_crds_are_strimzis_v1_kafkatopic_and_kafkauser() -> None:
    assert {("kafka.strimzi.io/v1", "KafkaTopic"), ("kafka.strimzi.io/v1", "KafkaUser")} <= _schemas().keys()
    assert "Strimzi 1.2.0" in (STRIMZI / "README.md").read_text()


@pytest.mark.parametrize("document", _documents(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_every_yaml_of_the_page_is_valid_for_its_crd(document: dict[str, Any]) -> None:
    schema = _schemas().get((document["apiVersion"], document["kind"]))
    assert schema is not None, f"{document['apiVersion']} {document['kind']}: no schema to check it with"
    jsonschema.validate(document, schema)
    model: type[Resource] | None = next((m for m in RESOURCES if m.crd.kind == document["kind"]), None)
    if model is not None:  # ordo's own: the model's rules too (what the operator reads)
        model.model_validate(document)


def test_the_strict_check_catches_a_typo() -> None:
    topic = copy.deepcopy(_of_kind("KafkaTopic")[0])
    topic["spec"]["partitons"] = topic["spec"].pop("partitions")
    with pytest.raises(jsonschema.ValidationError, match="partitons"):
        jsonschema.validate(topic, _schemas()["kafka.strimzi.io/v1", "KafkaTopic"])
    scaled = copy.deepcopy(_of_kind("ScaledObject")[0])
    scaled["spec"]["triggers"][0]["metadata"]["allowIdleConsumers"] = False  # KEDA takes strings only
    with pytest.raises(jsonschema.ValidationError, match="False is not of type 'string'"):
        jsonschema.validate(scaled, _schemas()["keda.sh/v1alpha1", "ScaledObject"])
    user = copy.deepcopy(_of_kind("KafkaUser")[0])
    user["spec"]["authorization"]["acls"][0]["operations"] = ["Produce"]
    with pytest.raises(jsonschema.ValidationError, match="Produce"):
        jsonschema.validate(user, _schemas()["kafka.strimzi.io/v1", "KafkaUser"])


def test_the_control_topics_are_declared_as_ordo_makes_them() -> None:
    declared = {t["spec"].get("topicName", t["metadata"]["name"]): t["spec"] for t in _of_kind("KafkaTopic")}
    for topic in (DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC, DEFAULT_CHECKPOINT_TOPIC):
        assert declared[topic]["partitions"] == 1, topic
        assert declared[topic]["config"]["cleanup.policy"] == "compact", topic


def _acls(user: str) -> set[tuple[str, str, str]]:
    (found,) = [u for u in _of_kind("KafkaUser") if u["metadata"]["name"] == user]
    return {
        (acl["resource"]["type"], acl["resource"].get("name", ""), operation)
        for acl in found["spec"]["authorization"]["acls"]
        for operation in acl["operations"]
    }


def test_the_kafkausers_grant_the_acl_table_of_security_md() -> None:
    operator, producers, consumers = _acls("ordo-operator"), _acls("ordo-producers"), _acls("ordo-consumers")
    epochs, registry, checkpoints = DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC, DEFAULT_CHECKPOINT_TOPIC
    # writers of each control topic, as the table says: the epoch log the operator's alone
    assert ("topic", epochs, "Write") in operator
    assert ("topic", epochs, "Write") not in producers | consumers
    assert ("topic", registry, "Write") in producers and ("topic", registry, "Read") in operator
    assert ("topic", checkpoints, "Write") in producers and ("topic", checkpoints, "Read") in operator
    # every client reads the epoch log; the operator grows data topics; members' transactional ids
    assert all(("topic", epochs, "Read") in acls for acls in (producers, consumers))
    assert ("topic", "orders", "Alter") in operator
    assert ("transactionalId", "ordo.kafka.orders-cdc.", "Write") in producers
    assert ("group", "orders-readers", "Read") in consumers
    heading = "Kafka ACLs for ordo's topics"  # the page names the table it follows
    assert heading in DOC.read_text() and f"## {heading}" in (ROOT / "docs" / "security.md").read_text()


def test_the_connections_shown_build_librdkafka_settings_from_strimzis_secrets() -> None:
    strimzi_secrets = {
        "ordo-producers": {"password": "pw", "sasl.jaas.config": "…"},
        "ordo-operator-tls": {"user.crt": "CERT", "user.key": "KEY", "ca.crt": "CA"},
        "my-cluster-cluster-ca-cert": {"ca.crt": "CA"},
    }
    for document in _documents():
        if document["apiVersion"] == "ordo.dev/v1alpha1":
            kafka = document["spec"]["kafka"]
            config = librdkafka_config(
                kafka["bootstrapServers"], kafka["authentication"], kafka["tls"], secrets=strimzi_secrets.get
            )
            assert config["security.protocol"] in ("SSL", "SASL_SSL") and config["ssl.ca.pem"] == "CA"
