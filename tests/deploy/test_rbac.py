"""The chart's RBAC grants exactly what the operator's code uses: a new Kubernetes call or kopf
handler without a matching rule fails here, and so does a rule nothing uses."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .chart import VALUE_SETS, component, render
from .rbac_derivation import (
    ROOT,
    DerivationError,
    Permission,
    Use,
    client_calls,
    granted,
    kopf_handler_uses,
    modules_from,
    operator_uses,
)

RBAC_SETS = [name for name, values in VALUE_SETS.items() if values.get("rbac", {}).get("create", True)]


def _operator_rules(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rules per Role/ClusterRole of the operator (member roles are checked separately)."""
    return {
        f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o["rules"]
        for o in objects
        if o["kind"] in {"Role", "ClusterRole"} and component(o) == "operator"
    }


def _mode(values: dict[str, Any]) -> dict[str, bool]:
    clusterwide = values.get("rbac", {}).get("scope", "cluster") == "cluster"
    peering = values.get("replicaCount", 1) > 1 or values.get("peering", {}).get("enabled", False)
    return {"clusterwide": clusterwide, "peering": peering, "scanning": clusterwide}


@pytest.mark.parametrize("name", RBAC_SETS)
def test_rbac_grants_exactly_what_the_operator_uses(name: str) -> None:
    uses = operator_uses(**_mode(VALUE_SETS[name]))
    needed = {use.permission for use in uses}
    roles = _operator_rules(render(name))
    assert roles
    if _mode(VALUE_SETS[name])["clusterwide"]:  # the ClusterRoles together, wherever each is bound
        roles = {" + ".join(roles): [rule for rules in roles.values() for rule in rules]}
    for role, rules in roles.items():
        have = granted(rules)
        missing = sorted(needed - have)
        where = {str(p): sorted({u.where for u in uses if u.permission == p}) for p in missing}
        assert not missing, f"{role} lacks permissions the operator uses: {where}"
        unused = sorted(have - needed, key=str)
        assert not unused, f"{role} grants what no operator code uses: {[str(p) for p in unused]}"


def test_workload_namespaces_keep_pod_patches_and_secrets_out_of_the_cluster_wide_role() -> None:
    objects = render("workloads")
    bound = {o["roleRef"]["name"] for o in objects if o["kind"] == "ClusterRoleBinding"}
    (cluster_wide,) = [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] in bound]
    workloads = {Permission("", "pods", "patch"), Permission("", "secrets", "get")}
    workloads |= {Permission("kafka.strimzi.io", "kafkatopics", verb) for verb in ("get", "patch")}
    assert not granted(cluster_wide["rules"]) & workloads
    bindings = [o for o in objects if o["kind"] == "RoleBinding" and component(o) == "operator"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["billing", "data"]
    (target,) = {b["roleRef"]["name"] for b in bindings}
    (role,) = [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == target]
    assert granted(role["rules"]) == workloads


def test_namespace_scope_needs_no_cluster_scoped_resource() -> None:
    # kopf's scanning is off there; peering uses the namespaced kind.
    uses = operator_uses(clusterwide=False, peering=True, scanning=False)
    resources = {u.permission.resource for u in uses}
    assert not resources & {"customresourcedefinitions", "namespaces", "clusterkopfpeerings"}
    assert "kopfpeerings" in resources


def test_derivation_sees_the_current_operator() -> None:
    permissions = {use.permission for use in operator_uses(clusterwide=True, peering=False, scanning=True)}
    assert {
        Permission("ordo.dev", "orderedtopicexpansions", "watch"),
        Permission("ordo.dev", "orderedtopicexpansions", "patch"),  # the daemon's finalizer
        Permission("ordo.dev", "orderedtopicexpansions/status", "patch"),  # kube.patch_status
        Permission("", "secrets", "get"),  # spec.kafka.secretRef
        Permission("kafka.strimzi.io", "kafkatopics", "patch"),  # spec.kafkaTopicRef
        Permission("", "events", "create"),
        Permission("", "pods", "patch"),  # ProducerGroup assignments
        Permission("coordination.k8s.io", "leases", "watch"),  # members' Leases
        Permission("ordo.dev", "producergroups/status", "patch"),
    } <= permissions
    assert all(use.where for use in kopf_handler_uses())


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> dict[str, Path]:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return {name: path}


def test_derivation_finds_new_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the ProducerGroup handler will do, in miniature: each call becomes a permission."""
    modules = _module(tmp_path, monkeypatch, "pg_sample", """
        from kubernetes import watch
        from kubernetes.client import CoordinationV1Api, CoreV1Api, CustomObjectsApi

        GROUP, PLURAL = "ordo.dev", "producergroups"

        def assign(api, namespace, pod, annotations):
            CoreV1Api(api).patch_namespaced_pod(pod, namespace, {"metadata": {"annotations": annotations}})

        def leases(api, namespace):
            leases = CoordinationV1Api(api)
            return leases.list_namespaced_lease(namespace)

        def follow(api, namespace):
            return watch.Watch().stream(CoreV1Api(api).list_namespaced_pod, namespace)

        def set_status(api, plural, namespace, name, status):
            CustomObjectsApi(api).patch_namespaced_custom_object_status(
                GROUP, "v1alpha1", namespace, plural, name, {"status": status})

        def rebalanced(api):
            set_status(api, PLURAL, "ns", "g", {})
            set_status(api, plural="orderedtopicexpansions", namespace="ns", name="e", status={})
    """)  # fmt: skip
    found = {(use.permission, use.where.rsplit(":", 1)[1]) for use in client_calls(modules)}
    assert {p for p, _ in found} == {
        Permission("", "pods", "patch"),
        Permission("coordination.k8s.io", "leases", "list"),
        Permission("", "pods", "watch"),
        Permission("ordo.dev", "producergroups/status", "patch"),
        Permission("ordo.dev", "orderedtopicexpansions/status", "patch"),
    }


def test_derivation_refuses_what_it_cannot_resolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ambiguous = _module(tmp_path, monkeypatch, "ambiguous_sample", """
        def post(api, namespace, event):
            api.create_namespaced_event(namespace, event)  # core/v1 or events.k8s.io/v1?
    """)  # fmt: skip
    with pytest.raises(DerivationError, match=r"ambiguous_sample\.py:3"):
        client_calls(ambiguous)
    dynamic = _module(tmp_path, monkeypatch, "dynamic_sample", """
        from kubernetes.client import CustomObjectsApi

        def get(api, ns, name):
            CustomObjectsApi(api).get_namespaced_custom_object("ordo.dev", "v1", ns, name.lower(), name)
    """)  # fmt: skip
    with pytest.raises(DerivationError, match="cannot resolve"):
        client_calls(dynamic)


def test_granted_refuses_wildcards() -> None:
    with pytest.raises(DerivationError):
        granted([{"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}])


def _member_modules() -> dict[str, Path]:
    """The SDK modules a ProducerGroup member runs: where GroupProducer is defined, if it is yet."""
    for path in sorted((ROOT / "sdk" / "ordo").rglob("*.py")):
        if "class GroupProducer" in path.read_text():
            name = ".".join(("ordo", *path.relative_to(ROOT / "sdk" / "ordo").with_suffix("").parts))
            return modules_from([name.removesuffix(".__init__")])
    return {}


def test_member_rbac_covers_what_group_producer_calls() -> None:
    modules = _member_modules()
    if not modules:
        pytest.skip("GroupProducer is not written yet; the member Role follows the design")
    uses: list[Use] = client_calls(modules)
    (role,) = [o for o in render("members") if o["kind"] == "Role" and component(o) == "member"][:1]
    missing = {use.permission for use in uses} - granted(role["rules"])
    assert not missing, [(str(u.permission), u.where) for u in uses if u.permission in missing]
