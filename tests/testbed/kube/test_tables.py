"""Server-side printing with printer columns (what ``kubectl get`` shows)."""

from __future__ import annotations

from typing import Any

import pytest

from ordo.testbed.kube.tables import age, jsonpath

from .conftest import widget
from .helpers import request

OBJ = {
    "metadata": {"name": "x"},
    "spec": {"list": [{"a": 1}, {"a": 2}]},
    "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Other", "status": "False"}]},
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".metadata.name", "x"),
        (".spec.list[1].a", 2),
        (".spec.list[5].a", None),
        ('.status.conditions[?(@.type=="Ready")].status', "True"),
        (".status.conditions[?(@.type=='Other')].status", "False"),
        ('.status.conditions[?(@.type=="Gone")].status', None),
        (".missing.deeper", None),
    ],
)
def test_jsonpath(path: str, expected: Any) -> None:
    assert jsonpath(OBJ, path) == expected


def test_age() -> None:
    assert age("2000-01-01T00:00:00Z").endswith("d")
    assert age(None) == "<unknown>"


@pytest.mark.usefixtures("test_crds")
def test_table_output(kube: Any) -> None:
    ns = kube.namespace
    kube.custom.create_namespaced_custom_object("testbed.ordo.dev", "v1", ns, "widgets", widget("a", size=4))
    kube.custom.patch_namespaced_custom_object_status(
        "testbed.ordo.dev", "v1", ns, "widgets", "a", {"status": {"phase": "Ready"}}
    )
    accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
    code, _, body = request(
        kube.kubeconfig_path, "GET", f"/apis/testbed.ordo.dev/v1/namespaces/{ns}/widgets", headers=accept
    )
    assert code == 200 and body["kind"] == "Table"
    assert [c["name"] for c in body["columnDefinitions"]] == ["Name", "Size", "Phase"]
    assert [r["cells"] for r in body["rows"]] == [["a", 4, "Ready"]]
