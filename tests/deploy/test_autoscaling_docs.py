"""docs/autoscaling.md: its TopicAutoscaler is valid for the CRD (unknown fields refused, as
``kubectl apply`` refuses them) and the model, and its KEDA example scales by the same topic."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import yaml

from ordo.api import TopicAutoscaler
from ordo.api.crd import crd_manifest

from .chart import ROOT

DOC = ROOT / "docs" / "autoscaling.md"
_YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.S | re.M)


def _documents() -> list[dict[str, Any]]:
    return [d for block in _YAML_BLOCK.findall(DOC.read_text()) for d in yaml.safe_load_all(block) if d]


def _strict(node: dict[str, Any]) -> None:
    if "properties" in node:
        node.setdefault("additionalProperties", False)
        for child in node["properties"].values():
            _strict(child)
    if isinstance(node.get("items"), dict):
        _strict(node["items"])


def test_the_autoscaler_of_the_page_is_valid_and_keda_follows_its_topic() -> None:
    kinds = {d["kind"]: d for d in _documents()}
    assert set(kinds) == {"TopicAutoscaler", "ScaledObject"}
    schema = crd_manifest(TopicAutoscaler)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    _strict(schema)
    schema["properties"]["metadata"] = {"type": "object"}
    jsonschema.Draft4Validator(schema).validate(kinds["TopicAutoscaler"])  # OpenAPI v3: draft 4's bounds
    autoscaler = TopicAutoscaler.model_validate(kinds["TopicAutoscaler"])
    (trigger,) = kinds["ScaledObject"]["spec"]["triggers"]
    assert trigger["type"] == "kafka" and trigger["metadata"]["topic"] == autoscaler.spec.topic
    assert kinds["ScaledObject"]["spec"]["maxReplicaCount"] == autoscaler.spec.max_partitions
    groups = {g.name for g in autoscaler.spec.targets.consumer_groups}
    assert trigger["metadata"]["consumerGroup"] in groups
