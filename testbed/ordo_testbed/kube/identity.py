"""The identities the chart gives the operator and members, on the testbed's API server: the
rendered ServiceAccounts, Roles and bindings applied, and a kubeconfig with a ServiceAccount's
token (from the TokenRequest API, as a Pod would get one). Rendering needs ``helm-python-sdk``
(the ``dev`` extra): Helm's own engine, no helm binary."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from ordo_testbed.kube.apiserver import KubeApiServer

__all__ = ["CHART", "apply_rbac", "chart_rbac", "member_identity", "operator_identity", "token_kubeconfig"]

CHART = Path(__file__).resolve().parents[3] / "charts" / "ordo"
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def chart_rbac(values: dict[str, Any], release: str, namespace: str) -> list[dict[str, Any]]:
    """The RBAC objects (ServiceAccounts first) the chart renders for a release in ``namespace``."""
    import helm_python as helm

    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values, name=release, namespace=namespace, is_install=True)
    objects = [
        doc
        for name, text in sorted(manifests.items()) if not name.endswith(".txt")
        for doc in yaml.safe_load_all(text) if doc and doc["kind"] in RBAC_KINDS
    ]  # fmt: skip
    return sorted(objects, key=lambda o: RBAC_KINDS.index(o["kind"]))


def apply_rbac(api: Any, objects: list[dict[str, Any]]) -> None:
    """Create them (an existing one is left as it is)."""
    import kubernetes

    core: Any = kubernetes.client.CoreV1Api(api)
    rbac: Any = kubernetes.client.RbacAuthorizationV1Api(api)
    create = {
        "ServiceAccount": lambda o: core.create_namespaced_service_account(o["metadata"]["namespace"], o),
        "Role": lambda o: rbac.create_namespaced_role(o["metadata"]["namespace"], o),
        "RoleBinding": lambda o: rbac.create_namespaced_role_binding(o["metadata"]["namespace"], o),
        "ClusterRole": rbac.create_cluster_role,
        "ClusterRoleBinding": rbac.create_cluster_role_binding,
    }
    for obj in objects:
        try:
            create[obj["kind"]](obj)
        except kubernetes.client.ApiException as error:
            if error.status != 409:
                raise


def token_kubeconfig(server: KubeApiServer, api: Any, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig for a ServiceAccount, with a token valid for six hours (a soak takes one)."""
    import kubernetes

    core: Any = kubernetes.client.CoreV1Api(api)
    token = core.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 6 * 3600}}
    ).status.token
    ca = base64.b64encode(server.pki.path("ca.crt").read_bytes()).decode()
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "tb", "cluster": {"server": server.url, "certificate-authority-data": ca}}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "tb", "user": account, "namespace": namespace}}],
    }))  # fmt: skip
    path.chmod(0o600)
    return path


def operator_identity(server: KubeApiServer, api: Any, namespace: str, folder: Path) -> Path:
    """The operator as the chart installs it to serve ``namespace`` alone (``rbac.scope=namespace``,
    released there): its RBAC applied, and its kubeconfig. Run it with ``--no-scanning``, as the
    chart does."""
    objects = chart_rbac({"rbac": {"scope": "namespace"}, "watchNamespaces": [namespace]}, "ordo", namespace)
    apply_rbac(api, objects)
    (account,) = [o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"]
    return token_kubeconfig(server, api, namespace, account, folder / "operator.kubeconfig")


def member_identity(server: KubeApiServer, api: Any, namespace: str, folder: Path) -> Path:
    """ProducerGroup members as the chart's ``memberRbac`` makes them in ``namespace``: its
    ServiceAccount, Role and RoleBinding applied, and the ServiceAccount's kubeconfig."""
    values = {"rbac": {"create": False}, "memberRbac": {"create": True, "namespaces": [namespace]}}
    objects = chart_rbac(values, "ordo", namespace)
    apply_rbac(api, objects)
    account = next(o for o in objects if o["kind"] == "RoleBinding")["subjects"][0]["name"]
    return token_kubeconfig(server, api, namespace, account, folder / "member.kubeconfig")
