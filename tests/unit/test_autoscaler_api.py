"""TopicAutoscaler's model: the rules the API server checks (CEL) hold in the model too."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ordo.api import Growth, TopicAutoscaler
from ordo.api.crd import crd_manifest


def _autoscaler(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ordo.dev/v1alpha1",
        "kind": "TopicAutoscaler",
        "metadata": {"name": "orders"},
        "spec": {"topic": "orders", "maxPartitions": 16, "targets": {"recordsPerSecondPerPartition": 500}}
        | spec,
    }


def test_defaults_and_wire_names() -> None:
    spec = TopicAutoscaler.model_validate(_autoscaler()).spec
    assert (spec.min_partitions, spec.growth, spec.stabilization_window_seconds) == (1, Growth.DOUBLE, 60)
    assert (spec.cooldown_seconds, spec.measure_interval_seconds) == (120, 5.0)
    lag = {"consumerGroups": [{"name": "billing", "lagPerPartition": 1000}]}
    assert (
        TopicAutoscaler.model_validate(_autoscaler(targets=lag)).spec.targets.consumer_groups[0].name
        == "billing"
    )


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"minPartitions": 32}, "minPartitions must not be larger than maxPartitions"),
        ({"targets": {}}, "give at least one target"),
        ({"targets": {"consumerGroups": []}}, "give at least one target"),
        ({"maxPartitions": 100_001}, "maxPartitions"),
        ({"growth": "triple"}, "growth"),
        ({"targets": {"recordsPerSecondPerPartition": 0}}, "recordsPerSecondPerPartition"),
    ],
)
def test_bad_specs_are_refused_saying_what_to_fix(spec: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        TopicAutoscaler.model_validate(_autoscaler(**spec))


def test_the_crd_carries_the_same_rules_for_the_api_server() -> None:
    version = crd_manifest(TopicAutoscaler)["spec"]["versions"][0]
    schema = version["schema"]["openAPIV3Schema"]
    rules = [v["message"] for v in schema["x-kubernetes-validations"]]
    targets = schema["properties"]["spec"]["properties"]["targets"]["x-kubernetes-validations"]
    assert rules == ["minPartitions must not be larger than maxPartitions"]
    assert targets[0]["message"].startswith("give at least one target")
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns[:3] == ["Topic", "Current", "Desired"] and "Last decision" in columns
