"""API semantics of the engine (Cluster), without HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ordo.testbed.kube import ApiError, Cluster, read_crds
from ordo.testbed.kube.resources import ResourceType
from ordo.testbed.kube.selectors import matcher
from ordo.testbed.kube.state import StateFile

from .conftest import CRD_DIR, widget

ALL = matcher(None, None, {})


@pytest.fixture
def cluster() -> Cluster:
    c = Cluster()
    for crd in read_crds(CRD_DIR):
        c.apply_crd(crd)
    return c


def rt(c: Cluster, plural: str, group: str = "testbed.ordo.dev", version: str = "v1") -> ResourceType:
    return c.resolve(group, version, plural)


def merge(
    c: Cluster, kind: ResourceType, name: str, body: Any, sub: str | None = None, ns: str = "default"
) -> Any:
    return c.patch(kind, "v1", ns, name, "application/merge-patch+json", json.dumps(body).encode(), sub)


def code(fn: Any) -> int:
    with pytest.raises(ApiError) as e:
        fn()
    return e.value.code


def test_server_fills_metadata(cluster: Cluster) -> None:
    w = rt(cluster, "widgets")
    a = cluster.create(w, "v1", "default", widget("a"))
    b = cluster.create(w, "v1", "default", {**widget(""), "metadata": {"generateName": "b-"}})
    meta = a["metadata"]
    assert meta["generation"] == 1 and meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert meta["namespace"] == "default"
    assert int(b["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    assert b["metadata"]["name"].startswith("b-") and len(b["metadata"]["name"]) == 7
    assert code(lambda: cluster.create(w, "v1", "default", widget("a"))) == 409
    assert code(lambda: cluster.create(w, "v1", "nowhere", widget("c"))) == 404
    other = {**widget("d"), "metadata": {"name": "d", "namespace": "kube-system"}}
    assert code(lambda: cluster.create(w, "v1", "default", other)) == 400
    assert code(lambda: cluster.create(w, "v1", "default", widget("Bad_Name"))) == 422
    assert code(lambda: cluster.create(w, "v1", "default", {"spec": {"topic": "t"}})) == 422


def test_generation_and_status_subresource(cluster: Cluster) -> None:
    w = rt(cluster, "widgets")
    cluster.create(w, "v1", "default", {**widget("a"), "status": {"phase": "Ignored"}})
    assert "status" not in cluster.get(w, "default", "a")
    after_labels = merge(cluster, w, "a", {"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Nope"}})
    assert after_labels["metadata"]["generation"] == 1 and "status" not in after_labels
    after_status = merge(cluster, w, "a", {"spec": {"size": 7}, "status": {"phase": "Ready"}}, sub="status")
    assert after_status["status"] == {"phase": "Ready"} and after_status["spec"]["size"] == 3
    assert after_status["metadata"]["generation"] == 1
    after_spec = merge(cluster, w, "a", {"spec": {"size": 5}})
    assert after_spec["metadata"]["generation"] == 2 and after_spec["status"] == {"phase": "Ready"}


def test_noop_write_keeps_resource_version(cluster: Cluster) -> None:
    w = rt(cluster, "widgets")
    created = cluster.create(w, "v1", "default", widget("a"))
    same = merge(cluster, w, "a", {"spec": {"size": 3}})
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_update_conflicts_on_stale_resource_version(cluster: Cluster) -> None:
    w = rt(cluster, "widgets")
    created = cluster.create(w, "v1", "default", widget("a"))
    fresh = cluster.replace(w, "v1", "default", "a", {**created, "spec": {**created["spec"], "size": 4}})
    assert code(lambda: cluster.replace(w, "v1", "default", "a", {**created})) == 409
    stale_patch = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}}
    assert code(lambda: merge(cluster, w, "a", stale_patch)) == 409
    no_rv = {**fresh, "metadata": {"name": "a"}}
    assert code(lambda: cluster.replace(w, "v1", "default", "a", no_rv)) == 422


def test_finalizers_delay_deletion(cluster: Cluster) -> None:
    w = rt(cluster, "widgets")
    cluster.create(w, "v1", "default", {**widget("a"), "metadata": {"name": "a", "finalizers": ["x/y"]}})
    deleting = cluster.delete(w, "default", "a")
    assert deleting["metadata"]["deletionTimestamp"] and deleting["metadata"]["generation"] == 2
    assert code(lambda: merge(cluster, w, "a", {"metadata": {"finalizers": ["x/y", "new"]}})) == 422
    merge(cluster, w, "a", {"metadata": {"labels": {"still": "here"}}})
    gone = merge(cluster, w, "a", {"metadata": {"finalizers": None}})
    assert gone["metadata"]["name"] == "a"
    assert code(lambda: cluster.get(w, "default", "a")) == 404


def test_delete_preconditions(cluster: Cluster) -> None:
    w = rt(cluster, "widgets")
    cluster.create(w, "v1", "default", widget("a"))
    assert code(lambda: cluster.delete(w, "default", "a", {"preconditions": {"uid": "other"}})) == 409
    cluster.delete(w, "default", "a")
    assert code(lambda: cluster.delete(w, "default", "a")) == 404


def test_owner_references_are_garbage_collected(cluster: Cluster) -> None:
    w, cm = rt(cluster, "widgets"), rt(cluster, "configmaps", group="")
    owner = cluster.create(w, "v1", "default", widget("owner"))
    ref = {
        "apiVersion": "testbed.ordo.dev/v1",
        "kind": "Widget",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    cluster.create(cm, "v1", "default", {"metadata": {"name": "dep", "ownerReferences": [ref]}})
    cluster.delete(w, "default", "owner")
    assert code(lambda: cluster.get(cm, "default", "dep")) == 404


def test_dependent_with_a_remaining_owner_is_kept(cluster: Cluster) -> None:
    w, cm = rt(cluster, "widgets"), rt(cluster, "configmaps", group="")
    owners = [cluster.create(w, "v1", "default", widget(n)) for n in ("o1", "o2")]
    refs = [{"kind": "Widget", "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]} for o in owners]
    cluster.create(cm, "v1", "default", {"metadata": {"name": "dep", "ownerReferences": refs}})
    cluster.delete(w, "default", "o1")
    assert cluster.get(cm, "default", "dep")["metadata"]["ownerReferences"] == refs[1:]
    cluster.delete(w, "default", "o2")
    assert code(lambda: cluster.get(cm, "default", "dep")) == 404


def test_namespace_deletion_takes_its_content(cluster: Cluster) -> None:
    ns, w = rt(cluster, "namespaces", group=""), rt(cluster, "widgets")
    cluster.create(ns, "v1", "", {"metadata": {"name": "tmp"}})
    cluster.create(w, "v1", "tmp", widget("plain"))
    cluster.create(w, "v1", "tmp", {**widget("held"), "metadata": {"name": "held", "finalizers": ["x/y"]}})
    terminating = cluster.delete(ns, "", "tmp")
    assert terminating["status"]["phase"] == "Terminating"
    assert code(lambda: cluster.create(w, "v1", "tmp", widget("late"))) == 403
    assert [o["metadata"]["name"] for o in cluster.list(w, "tmp", ALL)] == ["held"]
    merge(cluster, w, "held", {"metadata": {"finalizers": []}}, ns="tmp")
    assert code(lambda: cluster.get(ns, "", "tmp")) == 404


def test_crd_deletion_removes_kind_and_objects(cluster: Cluster) -> None:
    crd = rt(cluster, "customresourcedefinitions", group="apiextensions.k8s.io")
    cluster.create(rt(cluster, "gadgets"), "v1", "", {"metadata": {"name": "g"}, "spec": {"color": "red"}})
    cluster.delete(crd, "", "gadgets.testbed.ordo.dev")
    assert code(lambda: rt(cluster, "gadgets")) == 404
    assert cluster.store.items("gadgets.testbed.ordo.dev") == []


def test_second_version_sees_same_objects(cluster: Cluster) -> None:
    cluster.create(rt(cluster, "widgets"), "v1", "default", widget("a"))
    beta = rt(cluster, "widgets", version="v1beta1")
    seen = cluster.view(beta, "v1beta1", cluster.get(beta, "default", "a"))
    assert seen["apiVersion"] == "testbed.ordo.dev/v1beta1" and seen["spec"]["topic"] == "orders"


def test_persistence_round_trip(cluster: Cluster, tmp_path: Path) -> None:
    cluster.create(rt(cluster, "widgets"), "v1", "default", widget("a"))
    StateFile(tmp_path).save(cluster)
    restored = Cluster()
    assert StateFile(tmp_path).load(restored)
    assert restored.store.rv == cluster.store.rv
    assert restored.get(rt(restored, "widgets"), "default", "a")["spec"]["size"] == 3
    nxt = restored.create(rt(restored, "widgets"), "v1", "default", widget("b"))
    assert int(nxt["metadata"]["resourceVersion"]) == cluster.store.rv + 1
