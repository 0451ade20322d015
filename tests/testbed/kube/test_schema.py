"""OpenAPI v3 structural schema: pruning, defaulting, validation messages, without a server."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ordo.testbed.kube import read_crds
from ordo.testbed.kube.schema import admit, default, prune, validate

from .conftest import CRD_DIR

SCHEMA: dict[str, Any] = read_crds(CRD_DIR)[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def obj(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "testbed.ordo.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}


def messages(o: dict[str, Any]) -> list[str]:
    return [f"{c['field']}: {c['message']}" for c in admit(SCHEMA, o)]


def test_valid_object_gets_defaults() -> None:
    o = obj(topic="orders")
    assert admit(SCHEMA, o) == []
    assert o["spec"] == {"topic": "orders", "size": 3, "mode": "fast", "limits": {"cpu": 1}}


def test_null_of_non_nullable_field_is_defaulted_nullable_kept() -> None:
    o = obj(topic="t", size=None, note=None)
    assert admit(SCHEMA, o) == []
    assert o["spec"]["size"] == 3 and o["spec"]["note"] is None


def test_pruning_unknown_fields_but_not_preserved_ones() -> None:
    o = obj(topic="t", bogus=1, config={"anything": {"goes": [1]}}, labels={"x": "y"})
    o["extra"] = True
    o["metadata"]["labels"] = {"kept": "yes"}
    prune(SCHEMA, o)
    assert "bogus" not in o["spec"] and "extra" not in o
    assert o["spec"]["config"] == {"anything": {"goes": [1]}}
    assert o["spec"]["labels"] == {"x": "y"}
    assert o["metadata"]["labels"] == {"kept": "yes"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"size": 0}, "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"),
        ({"size": 11}, "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"),
        (
            {"size": "3"},
            'spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"',
        ),
        ({"mode": "warp"}, 'spec.mode: Unsupported value: "warp": supported values: "fast", "slow"'),
        ({"topic": ""}, 'spec.topic: Invalid value: "": spec.topic in body should be at least 1 chars long'),
        ({"topic": "x" * 21}, "spec.topic: Too long: may not be more than 20 bytes"),
        (
            {"topic": "Bad"},
            "spec.topic: Invalid value: \"Bad\": spec.topic in body should match '^[a-z][a-z0-9-]*$'",
        ),
        ({"ratio": 0}, "spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"),
        ({"tags": ["a", "b", "c", "d"]}, "spec.tags: Too many: 4: must have at most 3 items"),
        (
            {"tags": [1]},
            'spec.tags[0]: Invalid value: "integer": spec.tags[0] in body must be of type string: "integer"',
        ),
        (
            {"port": 1.5},
            'spec.port: Invalid value: "number": spec.port in body must be of type integer,string: "number"',
        ),
        (
            {"labels": {"a": 1}},
            'spec.labels.a: Invalid value: "integer": '
            'spec.labels.a in body must be of type string: "integer"',
        ),
    ],
)
def test_validation_messages(spec: dict[str, Any], expected: str) -> None:
    assert expected in messages(obj(**{"topic": "t", **spec}))


def test_required_fields() -> None:
    assert messages(obj()) == ["spec.topic: Required value"]
    no_spec = obj()
    del no_spec["spec"]
    assert messages(no_spec) == ["spec: Required value"]


def test_int_or_string_accepts_both() -> None:
    assert messages(obj(topic="t", port=80)) == []
    assert messages(obj(topic="t", port="http")) == []


def test_several_errors_are_all_reported() -> None:
    assert len(messages(obj(topic="Bad", size=0, mode="x"))) == 3


def test_combinators() -> None:
    schema = {"anyOf": [{"type": "integer"}, {"type": "string"}], "not": {"enum": [13]}}
    assert validate(schema, 1, "x") == [] and validate(schema, "a", "x") == []
    assert "anyOf" in validate(schema, 1.5, "x")[0]["message"]
    assert "must not validate" in validate(schema, 13, "x")[0]["message"]


def test_defaulting_does_not_touch_the_schema() -> None:
    before = copy.deepcopy(SCHEMA)
    o = obj(topic="t")
    default(SCHEMA, o)
    o["spec"]["limits"]["cpu"] = 99
    assert before == SCHEMA
