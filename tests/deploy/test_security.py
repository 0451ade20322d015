"""Least privilege of the rendered chart: a member may read pods and keep its own Lease, and
nothing more (it cannot patch pods, so it cannot rewrite its assignment); the operator confined
to namespaces gets Roles only, and Kafka credentials reach it from a Secret, never as literals."""

from __future__ import annotations

from typing import Any

from .chart import component, render


def _member_roles() -> list[dict[str, Any]]:
    return [o for o in render("members") if component(o) == "member" and o["kind"] in {"Role", "ClusterRole"}]


def test_the_member_role_is_namespaced_and_cannot_write_pods() -> None:
    roles = _member_roles()
    assert roles and {r["kind"] for r in roles} == {"Role"}
    assert {r["metadata"]["namespace"] for r in roles} == {"data", "billing"}
    for role in roles:
        verbs = {(res, verb) for rule in role["rules"] for res in rule["resources"] for verb in rule["verbs"]}
        assert verbs == {
            ("pods", "get"), ("pods", "list"), ("pods", "watch"),
            ("leases", "get"), ("leases", "create"), ("leases", "update"),
        }, verbs  # fmt: skip
        assert all("*" not in rule["verbs"] and "*" not in rule["resources"] for rule in role["rules"])


def test_the_namespaced_operator_has_no_cluster_role() -> None:
    objects = render("namespaced")
    cluster_wide = [o for o in objects if o["kind"] in {"ClusterRole", "ClusterRoleBinding"}]
    # Only the people's roles (userRbac), which nothing in the chart binds.
    assert {(o["kind"], component(o)) for o in cluster_wide} == {("ClusterRole", "user-roles")}
    assert {o["metadata"]["namespace"] for o in objects if o["kind"] == "Role"} >= {"data", "billing"}


def test_a_namespaced_install_without_people_roles_creates_nothing_cluster_wide() -> None:
    """What docs/security.md tells an installer without a cluster admin to render."""
    objects = render("namespaced-alone")
    assert not [o for o in objects if o["kind"] in {"ClusterRole", "ClusterRoleBinding"}]


def test_kafka_credentials_come_from_the_secret() -> None:
    (deployment,) = [o for o in render("kafka-secret") if o["kind"] == "Deployment"]
    env = [e for c in deployment["spec"]["template"]["spec"]["containers"] for e in c.get("env", [])]
    secret_env = [e for e in env if "password" in e["name"].lower() or "username" in e["name"].lower()]
    assert secret_env, env
    assert all(
        "value" not in e and e["valueFrom"]["secretKeyRef"]["name"] == "kafka-client" for e in secret_env
    )
