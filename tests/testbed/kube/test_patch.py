"""Merge, JSON and strategic-merge patches, without a server."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ordo.testbed.kube.patch import POD, PatchError, json_patch, merge_patch, strategic_merge

DOC: dict[str, Any] = {
    "metadata": {"name": "x", "resourceVersion": "5", "labels": {"a": "1"}, "finalizers": ["f1"]},
    "spec": {"list": [1, 2, 3], "map": {"k": "v"}},
}


def test_merge_patch_merges_maps_deletes_nulls_replaces_lists() -> None:
    out = merge_patch(DOC, {"metadata": {"labels": {"a": None, "b": "2"}}, "spec": {"list": [9]}})
    assert out["metadata"]["labels"] == {"b": "2"}
    assert out["spec"]["list"] == [9]
    assert out["spec"]["map"] == {"k": "v"}
    assert DOC["metadata"]["labels"] == {"a": "1"}  # input untouched


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)


@given(st.dictionaries(st.text(max_size=3), json_values, max_size=4))
def test_empty_merge_patch_is_identity(doc: dict[str, Any]) -> None:
    assert merge_patch(doc, {}) == doc


def test_json_patch_ops() -> None:
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "5"},
        {"op": "add", "path": "/metadata/finalizers/-", "value": "f2"},
        {"op": "replace", "path": "/spec/map/k", "value": "w"},
        {"op": "remove", "path": "/spec/list/0"},
        {"op": "copy", "from": "/spec/map", "path": "/spec/copied"},
        {"op": "move", "from": "/spec/copied/k", "path": "/spec/moved"},
        {"op": "add", "path": "/metadata/annotations", "value": {"a~b/c": "1"}},
        {"op": "replace", "path": "/metadata/annotations/a~0b~1c", "value": "2"},
    ]
    out = json_patch(DOC, ops)
    assert out["metadata"]["finalizers"] == ["f1", "f2"]
    assert out["spec"] == {"list": [2, 3], "map": {"k": "w"}, "copied": {}, "moved": "w"}
    assert out["metadata"]["annotations"] == {"a~b/c": "2"}


def test_json_patch_failed_test_is_unprocessable_not_malformed() -> None:
    with pytest.raises(PatchError) as e:
        json_patch(DOC, [{"op": "test", "path": "/metadata/resourceVersion", "value": "4"}])
    assert not e.value.malformed
    assert "testing value /metadata/resourceVersion failed" in str(e.value)


@pytest.mark.parametrize(
    ("ops", "malformed"),
    [
        ({"op": "add"}, True),
        ([{"op": "frobnicate", "path": "/a"}], True),
        ([{"op": "add", "path": "/a"}], True),
        ([{"op": "remove", "path": "/nope"}], False),
        ([{"op": "replace", "path": "/metadata/nope", "value": 1}], False),
        ([{"op": "add", "path": "/spec/list/7", "value": 1}], False),
        ([{"op": "add", "path": "/no/such/parent", "value": 1}], False),
    ],
)
def test_json_patch_errors(ops: Any, malformed: bool) -> None:
    with pytest.raises(PatchError) as e:
        json_patch(DOC, ops)
    assert e.value.malformed is malformed


def test_strategic_merge_pod() -> None:
    pod = {
        "metadata": {"labels": {"a": "1"}, "finalizers": ["f1"], "annotations": {"x": "1"}},
        "spec": {
            "containers": [
                {"name": "c1", "image": "i1", "env": [{"name": "A", "value": "1"}]},
                {"name": "c2"},
            ]
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
            "phase": "Running",
        },
    }
    patch = {
        "metadata": {"labels": {"b": "2"}, "finalizers": ["f2", "f1"], "annotations": {"x": None}},
        "spec": {"containers": [{"name": "c1", "image": "i2", "env": [{"name": "B", "value": "2"}]}]},
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Terminating"}]},
    }
    out = strategic_merge(pod, patch, POD)
    assert out["metadata"] == {"labels": {"a": "1", "b": "2"}, "finalizers": ["f1", "f2"], "annotations": {}}
    c1 = out["spec"]["containers"][0]
    assert c1["image"] == "i2" and [e["name"] for e in c1["env"]] == ["A", "B"]
    assert [c["name"] for c in out["spec"]["containers"]] == ["c1", "c2"]
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "False", "reason": "Terminating"},
        {"type": "PodScheduled", "status": "True"},
    ]
    assert out["status"]["phase"] == "Running"


def test_strategic_merge_directives() -> None:
    pod = {
        "metadata": {"finalizers": ["a", "b", "c"]},
        "spec": {"containers": [{"name": "c1"}, {"name": "c2"}], "tolerations": [{"key": "k"}]},
    }
    patch = {
        "metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]},
        "spec": {
            "containers": [{"name": "c2", "$patch": "delete"}],
            "$setElementOrder/containers": [{"name": "c1"}],
            "tolerations": [{"key": "new"}],  # no merge key: replaced as a whole
        },
    }
    out = strategic_merge(pod, patch, POD)
    assert out["metadata"]["finalizers"] == ["a", "c"]
    assert out["spec"] == {"containers": [{"name": "c1"}], "tolerations": [{"key": "new"}]}
    replaced = strategic_merge(pod, {"spec": {"$patch": "replace", "containers": []}}, POD)
    assert replaced["spec"] == {"containers": []}


def test_strategic_merge_needs_the_merge_key() -> None:
    with pytest.raises(PatchError):
        strategic_merge(
            {"spec": {"containers": [{"name": "c"}]}}, {"spec": {"containers": [{"image": "x"}]}}, POD
        )
