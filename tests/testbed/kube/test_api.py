"""The emulator through the official kubernetes client and raw HTTP: CRUD, errors, patches,
status, built-in kinds, discovery. (Watches: test_watch.py.)"""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from .conftest import widget
from .helpers import Collector, request

pytestmark = pytest.mark.usefixtures("test_crds")
G, V, W = "testbed.ordo.dev", "v1", "widgets"


def error(fn: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as e:
        fn()
    return e.value.status, json.loads(e.value.body)


def test_custom_object_crud(kube: Any) -> None:
    co, ns = kube.custom, kube.namespace
    created = co.create_namespaced_custom_object(G, V, ns, W, widget("a"))
    assert created["spec"]["size"] == 3  # defaulted
    assert co.get_namespaced_custom_object(G, V, ns, W, "a")["metadata"]["uid"] == created["metadata"]["uid"]
    co.create_namespaced_custom_object(G, V, ns, W, widget("b", size=5))
    names = [o["metadata"]["name"] for o in co.list_namespaced_custom_object(G, V, ns, W)["items"]]
    assert names == ["a", "b"]
    everywhere = co.list_cluster_custom_object(G, V, W, label_selector="")["items"]
    assert {"a", "b"} <= {o["metadata"]["name"] for o in everywhere}

    status, body = error(lambda: co.create_namespaced_custom_object(G, V, ns, W, widget("a")))
    assert (status, body["reason"], body["message"]) == (
        409,
        "AlreadyExists",
        'widgets.testbed.ordo.dev "a" already exists',
    )

    created["spec"]["size"] = 4
    replaced = co.replace_namespaced_custom_object(G, V, ns, W, "a", created)
    assert replaced["metadata"]["generation"] == 2
    status, body = error(lambda: co.replace_namespaced_custom_object(G, V, ns, W, "a", created))
    assert (status, body["reason"]) == (409, "Conflict")
    assert "the object has been modified" in body["message"]

    co.delete_namespaced_custom_object(G, V, ns, W, "a")
    status, body = error(lambda: co.get_namespaced_custom_object(G, V, ns, W, "a"))
    assert (status, body["kind"], body["reason"], body["message"]) == (
        404,
        "Status",
        "NotFound",
        'widgets.testbed.ordo.dev "a" not found',
    )
    assert body["details"] == {"name": "a", "group": G, "kind": "widgets"}


def test_unknown_kind_is_404(kube: Any) -> None:
    status, body = error(lambda: kube.custom.list_namespaced_custom_object(G, V, kube.namespace, "nothings"))
    assert (status, body["reason"]) == (404, "NotFound")


def test_schema_violation_is_422_with_real_message(kube: Any) -> None:
    status, body = error(
        lambda: kube.custom.create_namespaced_custom_object(G, V, kube.namespace, W, widget("a", size=0))
    )
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == (
        'Widget.testbed.ordo.dev "a" is invalid: '
        "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"
    )
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 0: spec.size in body should be greater than or equal to 1",
            "field": "spec.size",
        }
    ]


def test_unknown_fields_are_pruned(kube: Any) -> None:
    body = widget("a", bogus=True, config={"free": "form"})
    created = kube.custom.create_namespaced_custom_object(G, V, kube.namespace, W, body)
    assert "bogus" not in created["spec"] and created["spec"]["config"] == {"free": "form"}


def test_patches_and_status_subresource(kube: Any) -> None:
    co, ns = kube.custom, kube.namespace
    created = co.create_namespaced_custom_object(G, V, ns, W, widget("a"))
    rv = created["metadata"]["resourceVersion"]
    merged = co.patch_namespaced_custom_object(
        G, V, ns, W, "a", {"spec": {"size": 6}, "status": {"phase": "X"}}
    )
    assert merged["spec"]["size"] == 6 and "status" not in merged
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "add", "path": "/spec/tags", "value": ["t"]},
    ]
    jp = "application/json-patch+json"
    status, body = error(lambda: co.patch_namespaced_custom_object(G, V, ns, W, "a", ops, _content_type=jp))
    assert (status, body["reason"]) == (422, "Invalid")  # what kopf expects for a stale test op
    ops[0]["value"] = merged["metadata"]["resourceVersion"]
    assert co.patch_namespaced_custom_object(G, V, ns, W, "a", ops, _content_type=jp)["spec"]["tags"] == ["t"]

    patched = co.patch_namespaced_custom_object_status(
        G, V, ns, W, "a", {"status": {"phase": "Ready"}, "spec": {"size": 1}}
    )
    assert patched["status"] == {"phase": "Ready"} and patched["spec"]["size"] == 6
    status_obj = co.get_namespaced_custom_object_status(G, V, ns, W, "a")
    status_obj["status"]["observed"] = 2
    assert co.replace_namespaced_custom_object_status(G, V, ns, W, "a", status_obj)["status"]["observed"] == 2

    path = f"/apis/{G}/{V}/namespaces/{ns}/{W}/a"
    for ctype in ("application/strategic-merge-patch+json", "application/apply-patch+yaml"):
        code, _, rsp = request(kube.kubeconfig_path, "PATCH", path, {"spec": {}}, {"Content-Type": ctype})
        assert (code, rsp["reason"]) == (415, "UnsupportedMediaType")
    code, _, rsp = request(
        kube.kubeconfig_path, "PATCH", path, b"{not json", {"Content-Type": "application/merge-patch+json"}
    )
    assert code == 400


def test_pod_strategic_merge_and_status(kube: Any) -> None:
    core, ns = kube.core, kube.namespace
    pod = {
        "metadata": {"name": "p", "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "main", "image": "python"}, {"name": "side", "image": "busybox"}]},
    }
    created = core.create_namespaced_pod(ns, pod)
    assert created.status.phase == "Pending" and created.metadata.generation == 1
    conditions = [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]
    core.patch_namespaced_pod_status("p", ns, {"status": {"phase": "Running", "conditions": conditions}})
    core.patch_namespaced_pod_status(
        "p", ns, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    )
    got = core.read_namespaced_pod("p", ns)
    assert [(c.type, c.status) for c in got.status.conditions] == [
        ("Ready", "False"),
        ("PodScheduled", "True"),
    ]
    containers = [{"name": "side", "image": "alpine"}]
    smp = {"metadata": {"annotations": {"ordo.dev/assignment": "[1,2]"}}, "spec": {"containers": containers}}
    core.patch_namespaced_pod("p", ns, smp)
    got = core.read_namespaced_pod("p", ns)
    assert [(c.name, c.image) for c in got.spec.containers] == [("main", "python"), ("side", "alpine")]
    assert got.metadata.annotations == {"ordo.dev/assignment": "[1,2]"} and got.metadata.generation == 2
    core.delete_namespaced_pod("p", ns)
    assert error(lambda: core.read_namespaced_pod("p", ns))[0] == 404


def test_builtin_kinds(kube: Any) -> None:
    core, ns = kube.core, kube.namespace
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}, "data": {"k": "v"}})
    core.create_namespaced_secret(ns, {"metadata": {"name": "s"}, "stringData": {"k": "v"}, "type": "Opaque"})
    assert core.read_namespaced_config_map("cm", ns).data == {"k": "v"}
    assert [s.metadata.name for s in core.list_namespaced_secret(ns, field_selector="type=Opaque").items] == [
        "s"
    ]
    event = {
        "metadata": {"generateName": "e-"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns},
        "reason": "Tested",
        "message": "hello",
        "type": "Normal",
    }
    posted = core.create_namespaced_event(ns, event)
    assert posted.metadata.name.startswith("e-")
    found = core.list_namespaced_event(ns, field_selector="involvedObject.name=p,reason=Tested").items
    assert [e.message for e in found] == ["hello"]
    events_v1 = kubernetes.client.EventsV1Api(kube.api)
    new_event = {
        "metadata": {"name": "e2"},
        "eventTime": "2026-11-22T00:00:00.000000Z",
        **{"reason": "R", "action": "A", "type": "Normal"},
        **{"reportingController": "ordo", "reportingInstance": "i"},
    }
    assert events_v1.create_namespaced_event(ns, new_event).metadata.name == "e2"


def test_core_and_events_api_share_events(kube: Any) -> None:
    core, events_v1, ns = kube.core, kubernetes.client.EventsV1Api(kube.api), kube.namespace
    ref = {"kind": "Pod", "name": "p", "namespace": ns}
    # (eventTime is set: events.k8s.io shows a core Event without one as eventTime null, as real servers
    # do, and the Python client's EventsV1Event model rejects that)
    when = "2026-11-22T00:00:00.000000Z"
    old = {"metadata": {"name": "old"}, "involvedObject": ref, "message": "from core", "reason": "R",
           "source": {"component": "kopf"}, "count": 2, "eventTime": when}  # fmt: skip
    core.create_namespaced_event(ns, old)
    new = {"metadata": {"name": "new"}, "regarding": ref, "note": "from events.k8s.io", "reason": "R",
           "action": "A", "type": "Normal", "eventTime": "2026-11-22T00:00:00.000000Z",
           "reportingController": "ordo", "reportingInstance": "op-0"}  # fmt: skip
    events_v1.create_namespaced_event(ns, new)
    seen_core = {e.metadata.name: e for e in core.list_namespaced_event(ns).items}
    assert seen_core["new"].message == "from events.k8s.io" and seen_core["new"].involved_object.name == "p"
    assert seen_core["new"].reporting_component == "ordo"
    seen_v1 = {
        e.metadata.name: e
        for e in events_v1.list_namespaced_event(ns, field_selector="regarding.name=p").items
    }
    assert seen_v1["old"].note == "from core" and seen_v1["old"].deprecated_count == 2
    assert seen_v1["old"].deprecated_source.component == "kopf"
    events_v1.patch_namespaced_event("old", ns, {"note": "patched"})
    assert core.read_namespaced_event("old", ns).message == "patched"


def test_leases(kube: Any) -> None:
    coord, ns = kubernetes.client.CoordinationV1Api(kube.api), kube.namespace
    lease = {"metadata": {"name": "m-0", "annotations": {"ordo.dev/acked": "0"}},
             "spec": {"holderIdentity": "m-0", "leaseDurationSeconds": 30}}  # fmt: skip
    created = coord.create_namespaced_lease(ns, lease)
    created.spec.renew_time = "2026-11-22T00:00:01.000000Z"
    renewed = coord.replace_namespaced_lease("m-0", ns, created)
    assert renewed.metadata.resource_version != created.metadata.resource_version
    coord.patch_namespaced_lease("m-0", ns, {"metadata": {"annotations": {"ordo.dev/acked": "7"}}})
    assert coord.read_namespaced_lease("m-0", ns).metadata.annotations["ordo.dev/acked"] == "7"
    assert [x.metadata.name for x in coord.list_namespaced_lease(ns).items] == ["m-0"]
    coord.delete_namespaced_lease("m-0", ns)


def test_lease_watch(kube: Any) -> None:
    coord, ns = kubernetes.client.CoordinationV1Api(kube.api), kube.namespace
    watch = Collector(coord.list_namespaced_lease, ns, timeout_seconds=5)
    try:
        coord.create_namespaced_lease(ns, {"metadata": {"name": "m-1"}, "spec": {"holderIdentity": "m-1"}})
        coord.patch_namespaced_lease("m-1", ns, {"spec": {"leaseTransitions": 1}})
        coord.delete_namespaced_lease("m-1", ns)
        watch.wait(("ADDED", "m-1"), ("MODIFIED", "m-1"), ("DELETED", "m-1"))
    finally:
        watch.stop()


def test_namespace_from_url_and_mismatch(kube: Any) -> None:
    body = widget("a")
    body["metadata"]["namespace"] = "default"
    status, rsp = error(lambda: kube.custom.create_namespaced_custom_object(G, V, kube.namespace, W, body))
    assert (status, rsp["reason"]) == (400, "BadRequest")
    created = kube.custom.create_namespaced_custom_object(G, V, kube.namespace, W, widget("b"))
    assert created["metadata"]["namespace"] == kube.namespace


def test_list_pagination(kube: Any) -> None:
    for i in range(5):
        kube.core.create_namespaced_config_map(kube.namespace, {"metadata": {"name": f"cm{i}"}})
    seen, token = [], None
    while True:
        page = kube.core.list_namespaced_config_map(kube.namespace, limit=2, _continue=token)
        seen += [c.metadata.name for c in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert seen == [f"cm{i}" for i in range(5)]


def test_discovery(kube: Any) -> None:
    kc = kube.kubeconfig_path
    assert request(kc, "GET", "/api")[2]["versions"] == ["v1"]
    core = {r["name"]: r for r in request(kc, "GET", "/api/v1")[2]["resources"]}
    assert {"pods", "pods/status", "events", "secrets", "configmaps", "namespaces"} <= set(core)
    groups = {g["name"] for g in request(kc, "GET", "/apis")[2]["groups"]}
    assert {"coordination.k8s.io", "events.k8s.io", "apiextensions.k8s.io", G} <= groups
    widgets = {r["name"]: r for r in request(kc, "GET", f"/apis/{G}/v1")[2]["resources"]}
    assert widgets["widgets"]["shortNames"] == ["wd"] and widgets["widgets"]["categories"] == ["testbed"]
    assert widgets["widgets/status"]["verbs"] == ["get", "patch", "update"]
    accept = {
        "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    }
    _, headers, agg = request(kc, "GET", "/apis", headers=accept)
    assert headers["Content-Type"].startswith("application/json;g=apidiscovery.k8s.io;v=v2")
    ours = next(i for i in agg["items"] if i["metadata"].get("name") == G)
    res = {r["resource"]: r for v in ours["versions"] if v["version"] == "v1" for r in v["resources"]}
    assert (
        res["widgets"]["scope"] == "Namespaced"
        and res["widgets"]["subresources"][0]["subresource"] == "status"
    )
    assert res["gadgets"]["scope"] == "Cluster"
    dynamic = kubernetes.dynamic.DynamicClient(kube.api)
    assert dynamic.resources.get(api_version=f"{G}/v1", kind="Widget").namespaced


def test_crd_created_through_the_api_is_served_at_once(kube: Any) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(kube.api)
    group = f"{kube.namespace}.example.com"
    spec_schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    schema = {"type": "object", "properties": {"spec": spec_schema}}
    crd = {
        "metadata": {"name": f"things.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "Thing", "plural": "things", "singular": "thing"},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
            ],
        },
    }
    ext.create_custom_resource_definition(crd)
    try:
        thing = {
            "apiVersion": f"{group}/v1",
            "kind": "Thing",
            "metadata": {"name": "t"},
            "spec": {"n": 1, "x": 2},
        }
        created = kube.custom.create_namespaced_custom_object(group, "v1", kube.namespace, "things", thing)
        assert created["spec"] == {"n": 1}
    finally:
        ext.delete_custom_resource_definition(f"things.{group}")


def test_repo_crds_are_loaded(kube: Any) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(kube.api)
    names = {c.metadata.name for c in ext.list_custom_resource_definition().items}
    if "producergroups.ordo.dev" not in names:
        pytest.skip("crds/ has no ordo CRDs (or the cluster does not have them installed)")
    ote = {"apiVersion": "ordo.dev/v1alpha1", "kind": "OrderedTopicExpansion", "metadata": {"name": "x"},
           "spec": {"topic": "orders", "partitions": 0}}  # fmt: skip
    status, body = error(
        lambda: kube.custom.create_namespaced_custom_object(
            "ordo.dev", "v1alpha1", kube.namespace, "orderedtopicexpansions", ote
        )
    )
    assert status == 422
    assert (
        "spec.partitions: Invalid value: 0: spec.partitions in body should be greater than or equal to"
        in body["message"]
    )
