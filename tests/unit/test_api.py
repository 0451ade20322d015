from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from pydantic import ValidationError

from ordo.api import RESOURCES, KafkaConnection, LabelSelector, OrderedTopicExpansion, ProducerGroup
from ordo.api.common import Condition, Resource, set_condition
from ordo.api.crd import crd_filename, crd_manifest, render_crd
from ordo.cli import main as ordo

CRDS = Path(__file__).parents[2] / "crds"


@pytest.mark.parametrize("model", RESOURCES, ids=lambda m: m.crd.kind)
def test_crds_on_disk_are_generated_from_the_models(model: type[Resource]) -> None:
    path = CRDS / crd_filename(model)
    assert path.read_text() == render_crd(model), f"{path} is stale: run `make crds`"


def test_crd_check_command_detects_staleness(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ordo(["crds", "--output", str(tmp_path)]) == 0
    assert ordo(["crds", "--check", "--output", str(tmp_path)]) == 0
    stale = tmp_path / crd_filename(ProducerGroup)
    stale.write_text(stale.read_text().replace("minimum: 1", "minimum: 0", 1))
    assert ordo(["crds", "--check", "--output", str(tmp_path)]) == 1
    assert "out of date" in capsys.readouterr().out


@pytest.mark.parametrize("model", RESOURCES, ids=lambda m: m.crd.kind)
def test_crds_are_valid_kubernetes_objects(model: type[Resource]) -> None:
    manifest = crd_manifest(model)
    kubernetes_validate.validate(manifest, "1.33", strict=True)


def _walk(node: dict[str, Any], path: str = "") -> list[str]:
    """Violations of Kubernetes' structural-schema rules."""
    problems = []
    if "type" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        problems.append(f"{path or '/'}: no type")
    for banned in ("$ref", "anyOf", "oneOf", "allOf", "title", "const", "propertyNames", "$defs"):
        if banned in node:
            problems.append(f"{path}: {banned}")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: properties and additionalProperties")
    if node.get("additionalProperties") is False:
        problems.append(f"{path}: additionalProperties false")
    for name, sub in node.get("properties", {}).items():
        problems += _walk(sub, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            problems += _walk(node[key], f"{path}[{key}]")
    return problems


def _schema(model: type[Resource]) -> dict[str, Any]:
    version = crd_manifest(model)["spec"]["versions"][0]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("model", RESOURCES, ids=lambda m: m.crd.kind)
def test_schemas_are_structural(model: type[Resource]) -> None:
    assert _walk(_schema(model)) == []


def _as_json_schema(node: Any) -> Any:
    """OpenAPI v3.0's nullable → JSON Schema draft 4's type list, for jsonschema."""
    if isinstance(node, list):
        return [_as_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _as_json_schema(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable"):
        out["type"] = [node["type"], "null"]
    return out


def _errors(model: type[Resource], obj: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft4Validator(_as_json_schema(_schema(model)))
    return [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(obj)]


def _pg(**spec: Any) -> dict[str, Any]:
    base = {"sourcePartitions": 8, "selector": {"matchLabels": {"app": "cdc"}}}
    return {"apiVersion": "ordo.dev/v1alpha1", "kind": "ProducerGroup", "metadata": {}, "spec": base | spec}


def _ote(**spec: Any) -> dict[str, Any]:
    base = {"topic": "orders", "partitions": 8}
    return {
        "apiVersion": "ordo.dev/v1alpha1",
        "kind": "OrderedTopicExpansion",
        "metadata": {},
        "spec": base | spec,
    }


GOOD = [
    (ProducerGroup, _pg()),
    (ProducerGroup, _pg(assignment="roundRobin", sessionTimeoutSeconds=5, exactlyOnce=False)),
    (
        ProducerGroup,
        _pg(kafka={"bootstrapServers": "k-0:9092,k-1:9092", "secretRef": {"name": "kafka-creds"}}),
    ),
    (OrderedTopicExpansion, _ote()),
    (OrderedTopicExpansion, _ote(fenceTimeoutSeconds=5, kafka={"bootstrapServers": "[::1]:9092"})),
    (
        OrderedTopicExpansion,  # Strimzi's shape: a KafkaUser's Secret and the cluster CA's as they are
        _ote(
            kafka={
                "bootstrapServers": "my-cluster-kafka-bootstrap.kafka:9093",
                "authentication": {
                    "type": "scram-sha-512",
                    "username": "ordo",
                    "passwordSecret": {"secretName": "ordo", "password": "password"},
                },
                "tls": {
                    "trustedCertificates": [
                        {"secretName": "my-cluster-cluster-ca-cert", "certificate": "ca.crt"}
                    ]
                },
            }
        ),
    ),
    (
        ProducerGroup,
        _pg(
            kafka={
                "bootstrapServers": "k:9093",
                "authentication": {
                    "type": "tls",
                    "certificateAndKey": {"secretName": "ordo", "certificate": "user.crt", "key": "user.key"},
                },
                "tls": {},
            }
        ),
    ),
]

BAD = [
    (ProducerGroup, _pg(sourcePartitions=0), "sourcePartitions"),
    (ProducerGroup, _pg(sourcePartitions=-3), "sourcePartitions"),
    (ProducerGroup, _pg(sourcePartitions=10**9), "sourcePartitions"),
    (ProducerGroup, _pg(sessionTimeoutSeconds=0), "sessionTimeoutSeconds"),
    (ProducerGroup, _pg(assignment="best"), "assignment"),
    (ProducerGroup, _pg(checkpointTopic="bad topic"), "checkpointTopic"),
    (ProducerGroup, _pg(kafka={"bootstrapServers": "no-port"}), "bootstrapServers"),
    (ProducerGroup, _pg(selector={"matchExpressions": [{"key": "a", "operator": "Near"}]}), "operator"),
    (OrderedTopicExpansion, _ote(partitions=1), "partitions"),
    (OrderedTopicExpansion, _ote(partitions="many"), "partitions"),
    (OrderedTopicExpansion, _ote(topic=""), "topic"),
    (OrderedTopicExpansion, _ote(fenceTimeoutSeconds=0), "fenceTimeoutSeconds"),
    (
        OrderedTopicExpansion,
        _ote(kafka={"bootstrapServers": "k:9093", "authentication": {"type": "gssapi"}}),
        "type",
    ),
    (
        OrderedTopicExpansion,
        _ote(kafka={"bootstrapServers": "k:9093", "tls": {"trustedCertificates": [{"secretName": "c"}]}}),
        "certificate",
    ),
]


@pytest.mark.parametrize(("model", "obj"), GOOD)
def test_good_resources_pass_both_the_model_and_the_crd_schema(
    model: type[Resource], obj: dict[str, Any]
) -> None:
    assert _errors(model, obj) == []
    assert model.model_validate(obj).kind == obj["kind"]


@pytest.mark.parametrize(("model", "obj", "field"), BAD)
def test_bad_specs_are_refused_by_the_crd_schema_and_the_model(
    model: type[Resource], obj: dict[str, Any], field: str
) -> None:
    errors = _errors(model, obj)
    assert errors and any(field in e for e in errors), errors
    with pytest.raises(ValidationError, match=field):
        model.model_validate(obj)


def test_defaults_match_the_design() -> None:
    spec = ProducerGroup.model_validate(_pg()).spec
    assert (spec.session_timeout_seconds, spec.assignment, spec.exactly_once) == (30, "sticky", True)
    assert spec.checkpoint_topic == "__ordo_checkpoints"
    assert OrderedTopicExpansion.model_validate(_ote()).spec.fence_timeout_seconds == 60


@pytest.mark.parametrize("selector", [{}, {"matchLabels": {}, "matchExpressions": []}])
def test_an_empty_selector_is_refused_by_the_model_as_by_the_crds_cel_rule(selector: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="an empty selector would select every pod in the namespace"):
        ProducerGroup.model_validate(_pg(selector=selector))
    (rule,) = crd_manifest(ProducerGroup)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"
    ]["properties"]["selector"]["x-kubernetes-validations"]
    assert rule["message"].startswith("an empty selector would select every pod")  # kubectl: test_kubectl


def test_credentials_in_kafka_config_are_refused() -> None:
    with pytest.raises(
        ValidationError,
        match=r"credentials must come from a Secret \(authentication, or secretRef\), "
        r"not config: sasl\.password",
    ):
        KafkaConnection.model_validate({"bootstrapServers": "k:9092", "config": {"sasl.password": "x"}})
    ok = KafkaConnection.model_validate(
        {"bootstrapServers": "k:9092", "config": {"security.protocol": "SSL"}}
    )
    assert ok.config == {"security.protocol": "SSL"}


def test_status_round_trips_in_camel_case() -> None:
    pg = ProducerGroup.model_validate(
        _pg() | {"status": {"generation": 3, "members": [{"pod": "p-0", "partitions": [0, 1], "acked": 3}]}}
    )
    dumped = pg.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert dumped["status"]["members"] == [{"pod": "p-0", "partitions": [0, 1], "acked": 3}]
    assert dumped["spec"]["sourcePartitions"] == 8


def test_set_condition_keeps_transition_time_unless_status_changes() -> None:
    t0 = datetime(2026, 11, 22, tzinfo=UTC)
    first = set_condition([], "Ready", False, "Waiting", now=t0)
    same = set_condition(first, "Ready", False, "StillWaiting", "msg", now=t0 + timedelta(hours=1))
    assert same[0].last_transition_time == t0 and same[0].reason == "StillWaiting"
    flipped = set_condition(same, "Ready", True, "Assigned", now=t0 + timedelta(hours=2))
    assert flipped[0].last_transition_time == t0 + timedelta(hours=2)
    both = set_condition(flipped, "Degraded", False, "Healthy", now=t0)
    assert [c.type for c in both] == ["Degraded", "Ready"]
    with pytest.raises(ValidationError):
        Condition(type="Ready", status="Maybe", reason="X", last_transition_time=t0)


def test_label_selector_query_and_matching() -> None:
    selector = LabelSelector.model_validate(
        {
            "matchLabels": {"app": "cdc"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "canary", "operator": "DoesNotExist"},
            ],
        }
    )
    assert selector.to_query() == "app=cdc,tier in (a,b),!canary"
    assert selector.matches({"app": "cdc", "tier": "a"})
    assert not selector.matches({"app": "cdc", "tier": "c"})
    assert not selector.matches({"app": "cdc", "tier": "a", "canary": "1"})


def test_crd_files_parse_as_yaml_with_the_expected_names() -> None:
    names = {yaml.safe_load(p.read_text())["metadata"]["name"] for p in CRDS.glob("*.yaml")}
    assert names == {
        "producergroups.ordo.dev",
        "orderedtopicexpansions.ordo.dev",
        "topicautoscalers.ordo.dev",
    }
    pg = crd_manifest(ProducerGroup)["spec"]
    assert pg["names"]["shortNames"] == ["pg"] and pg["names"]["categories"] == ["ordo"]
    assert pg["versions"][0]["subresources"] == {"status": {}}
