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
from ordo_testbed.waiting import wait_for

__all__ = [
    "CHART",
    "apply_rbac",
    "chart_rbac",
    "member_identity",
    "operator_identity",
    "token_kubeconfig",
    "wait_rbac_effective",
]

CHART = Path(__file__).resolve().parents[3] / "charts" / "ordo"
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def chart_rbac(values: dict[str, Any], release: str, namespace: str) -> list[dict[str, Any]]:
    """The RBAC objects (ServiceAccounts first) the chart renders for a release in ``namespace``.
    Callers that apply them to a shared API server turn ``userRbac`` off unless they test it: its
    ClusterRoles are aggregated into every namespace's admin/edit/view."""
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
    """Create them (an existing one is left as it is), and wait until the authorizer grants what
    they grant (see ``wait_rbac_effective``)."""
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
    wait_rbac_effective(api, objects)


def _reviews(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A SubjectAccessReview spec per binding among ``objects`` whose role is among them too: its
    first subject asking for its role's first rule (first verb, group and resource)."""
    roles = {
        (o["kind"], o["metadata"].get("namespace") if o["kind"] == "Role" else None, o["metadata"]["name"]): o
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    specs: list[dict[str, Any]] = []
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding") or not binding.get("subjects"):
            continue
        namespace = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], namespace if ref["kind"] == "Role" else None, ref["name"]))
        rules = [r for r in (role or {}).get("rules") or [] if r.get("resources") and r.get("verbs")]
        if not rules:
            continue  # a role from elsewhere (or without resource rules): nothing known to ask
        rule = rules[0]
        resource, _, subresource = rule["resources"][0].partition("/")
        attributes: dict[str, Any] = {
            "verb": rule["verbs"][0],
            "group": (rule.get("apiGroups") or [""])[0],
            "resource": resource,
        }
        if subresource:
            attributes["subresource"] = subresource
        if rule.get("resourceNames"):
            attributes["name"] = rule["resourceNames"][0]
        if namespace:
            attributes["namespace"] = namespace
        subject = binding["subjects"][0]
        spec: dict[str, Any] = {"resourceAttributes": attributes}
        if subject["kind"] == "ServiceAccount":
            spec["user"] = f"system:serviceaccount:{subject.get('namespace', namespace)}:{subject['name']}"
        elif subject["kind"] == "Group":
            spec["groups"] = [subject["name"]]
        else:
            spec["user"] = subject["name"]
        specs.append(spec)
    return specs


def wait_rbac_effective(api: Any, objects: list[dict[str, Any]], timeout: float = 30.0) -> None:
    """Wait until the authorizer grants, for each binding among ``objects``, one rule of its role
    to its first subject (SubjectAccessReview): the API server's RBAC authorizer reads Roles and
    bindings from its informers' caches, which lag their creation."""
    import kubernetes

    authorization: Any = kubernetes.client.AuthorizationV1Api(api)
    for spec in _reviews(objects):

        def allowed(spec: dict[str, Any] = spec) -> bool:
            review = authorization.create_subject_access_review({"spec": spec})
            return bool(review.status.allowed)

        wait_for(allowed, timeout, f"RBAC to grant {spec}")


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
    values = {"rbac": {"scope": "namespace"}, "watchNamespaces": [namespace], "userRbac": {"create": False}}
    objects = chart_rbac(values, "ordo", namespace)
    apply_rbac(api, objects)
    (account,) = [o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"]
    return token_kubeconfig(server, api, namespace, account, folder / "operator.kubeconfig")


def member_identity(server: KubeApiServer, api: Any, namespace: str, folder: Path) -> Path:
    """ProducerGroup members as the chart's ``memberRbac`` makes them in ``namespace``: its
    ServiceAccount, Role and RoleBinding applied, and the ServiceAccount's kubeconfig."""
    values = {
        "rbac": {"create": False},
        "userRbac": {"create": False},
        "memberRbac": {"create": True, "namespaces": [namespace]},
    }
    objects = chart_rbac(values, "ordo", namespace)
    apply_rbac(api, objects)
    account = next(o for o in objects if o["kind"] == "RoleBinding")["subjects"][0]["name"]
    return token_kubeconfig(server, api, namespace, account, folder / "member.kubeconfig")
