"""The chart's RBAC under real authorization: its ServiceAccounts, ClusterRoles, Roles and bindings
applied to the testbed's kube-apiserver (RBAC on), ``kubectl auth can-i --list`` for the operator
and for members compared with docs/security.md, and the operator and a member run under those
identities through an expansion and a ProducerGroup handoff, with nothing refused; the user roles
aggregated into admin/edit/view by the testbed's kube-controller-manager, checked with
``kubectl auth can-i --as`` and real requests as people bound to each."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube import KubeApiServer
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.kube.identity import apply_rbac, chart_rbac, token_kubeconfig
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.pods import PodSet
from ordo_testbed.resources import Expansions, Groups, group_member_argv
from ordo_testbed.waiting import wait_for

from .chart import ROOT, component

pytestmark = pytest.mark.testbed
MEMBER_SA = "ordo-member"
_ROW = re.compile(r"^(\S+)\s+\[(.*?)\]\s+\[(.*?)\]\s+\[(.*?)\]\s*$")


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl is not installed")
    done = subprocess.run(
        [found, *args], input=stdin, capture_output=True, text=True, timeout=90, check=False,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def can_i(kubeconfig: Path, who: str, namespace: str) -> dict[str, set[str]]:
    """``kubectl auth can-i --list`` as ``who`` in a namespace: resource -> verbs."""
    out: dict[str, set[str]] = {}
    for line in kubectl(kubeconfig, "auth", "can-i", "--list", f"--as={who}", "-n", namespace).splitlines()[
        1:
    ]:
        found = _ROW.match(line)
        if found and found.group(2) == "":  # resource rules (non-resource URLs start with "[")
            out.setdefault(found.group(1), set()).update(found.group(4).split())
    return out


def documented() -> dict[tuple[str, str], dict[str, set[str]]]:
    """docs/security.md's table: (identity, where) -> resource -> verbs."""
    table: dict[tuple[str, str], dict[str, set[str]]] = {}
    for line in (ROOT / "docs" / "security.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] in ("operator", "member"):
            rules = table.setdefault((cells[0], cells[1]), {})
            for resource in re.findall(r"`([^`]+)`", cells[2]):
                rules.setdefault(resource, set()).update(v.strip() for v in cells[3].split(","))
    assert table, "docs/security.md has no permissions table"
    return table


def merged(*parts: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for part in parts:
        for resource, verbs in part.items():
            out.setdefault(resource, set()).update(verbs)
    return out


def beyond(granted: dict[str, set[str]], baseline: dict[str, set[str]]) -> dict[str, set[str]]:
    """What an identity may do besides what every authenticated user may."""
    extra = {r: v - baseline.get(r, set()) for r, v in granted.items()}
    return {r: v for r, v in extra.items() if v}


def cluster_scope(namespace: str) -> dict[str, Any]:
    return {"rbac": {"workloadNamespaces": [namespace]}}


def namespace_scope(namespace: str) -> dict[str, Any]:
    return {"rbac": {"scope": "namespace"}, "watchNamespaces": [namespace]}


@pytest.fixture
def installed(
    kube: Kube, kube_server: KubeApiServer, request: pytest.FixtureRequest
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The chart's RBAC for a release in the test's namespace, with the values the test is
    parametrized with (a function of the namespace): (operator ServiceAccount, objects)."""
    release = f"r{uuid.uuid4().hex[:8]}"  # cluster-scoped names must not meet another test's
    values = {
        **request.param(kube.namespace),
        "userRbac": {"create": False},  # aggregated into every namespace's roles: tested alone below
        "memberRbac": {"create": True, "namespaces": [kube.namespace]},
    }
    objects = chart_rbac(values, release, kube.namespace)
    apply_rbac(kube.api, objects)
    (operator_sa,) = [
        o["metadata"]["name"]
        for o in objects
        if o["kind"] == "ServiceAccount" and o["metadata"]["name"] != MEMBER_SA
    ]
    try:
        yield operator_sa, objects
    finally:
        rbac: Any = kubernetes.client.RbacAuthorizationV1Api(kube.api)
        for obj in objects:
            if obj["kind"] == "ClusterRoleBinding":
                rbac.delete_cluster_role_binding(obj["metadata"]["name"])
            elif obj["kind"] == "ClusterRole":
                rbac.delete_cluster_role(obj["metadata"]["name"])


@pytest.mark.parametrize("installed", [cluster_scope], indirect=True)
def test_can_i_lists_what_docs_security_says_and_nothing_more(
    kube: Kube, installed: tuple[str, list[dict[str, Any]]]
) -> None:
    operator_sa, _ = installed
    ns, config = kube.namespace, kube.kubeconfig_path
    kube.core.create_namespaced_service_account(ns, {"metadata": {"name": "nobody"}})
    baseline = can_i(config, f"system:serviceaccount:{ns}:nobody", ns)
    doc = documented()
    operator = f"system:serviceaccount:{ns}:{operator_sa}"
    everywhere = doc[("operator", "every namespace")]
    assert beyond(can_i(config, operator, ns), baseline) == merged(
        everywhere, doc[("operator", "workload namespaces")]
    )
    assert beyond(can_i(config, operator, "default"), baseline) == everywhere  # no Secrets, no pod patches
    member = f"system:serviceaccount:{ns}:{MEMBER_SA}"
    assert beyond(can_i(config, member, ns), baseline) == doc[("member", "its namespace")]
    assert beyond(can_i(config, member, "default"), baseline) == {}


@pytest.mark.parametrize("installed", [namespace_scope], indirect=True)
def test_the_operator_and_a_member_work_under_the_charts_identities(
    kube: Kube,
    kube_server: KubeApiServer,
    kafka: KafkaHandle,
    log_topics: tuple[str, str],
    installed: tuple[str, list[dict[str, Any]]],
    tmp_path: Path,
) -> None:
    operator_sa, _ = installed
    ns = kube.namespace
    as_operator = token_kubeconfig(kube_server, kube.api, ns, operator_sa, tmp_path / "operator.kubeconfig")
    as_member = token_kubeconfig(kube_server, kube.api, ns, MEMBER_SA, tmp_path / "member.kubeconfig")
    epochs, registry = log_topics
    operator = OperatorProcess(
        as_operator, kafka.bootstrap, namespaces=[ns], log_path=tmp_path / "operator.log",
        env={"ORDO_EPOCH_TOPIC": epochs, "ORDO_REGISTRY_TOPIC": registry},
        args=["--no-scanning"],  # as the chart runs a namespace-scoped operator
    )  # fmt: skip
    pods = PodSet(kube.kubeconfig_path, ns, log_dir=tmp_path / "pods", process_kubeconfig=as_member)
    with operator, pods:
        topic = kafka.create_topic(2, prefix="rbac")
        expansions = Expansions(kube.custom, ns)
        expansions.create("grow", topic, 4)
        expansions.wait_phase("grow", "Completed", 90)
        groups = Groups(kube.custom, ns)
        groups.create(
            "copy", 2, {"app": "copy"}, sessionTimeoutSeconds=5, checkpointTopic=kafka.topic("checkpoints")
        )
        argv = group_member_argv(
            kafka.bootstrap, topic, records=20, batch=5, rate=20, epoch_topic=epochs, registry_topic=registry
        )
        pods.start("m-0", argv, labels={"app": "copy"}, env={"ORDO_GROUP": "copy"})
        status = groups.wait_settled("copy", 1, 90, 2)
        assert [len(m["partitions"]) for m in status["members"]] == [2]
        assert "Rebalanced" in kube.event_reasons()  # the operator's Events, posted as itself
    log = operator.log_text() + pods.last_words()
    assert "Forbidden" not in log and " 403" not in log, log[-3000:]


# --- RBAC for people: the chart's user roles, aggregated into Kubernetes' admin, edit and view ---

PEOPLE = {"alice": "edit", "bob": "view", "carol": "admin", "dave": None}  # dave: no binding at all
ORDO = ("producergroups.ordo.dev", "orderedtopicexpansions.ordo.dev", "topicautoscalers.ordo.dev")
WRITES = ("create", "update", "patch", "delete", "deletecollection")
READS = ("get", "list", "watch")


def may(kubeconfig: Path, who: str, verb: str, resource: str, namespace: str, subresource: str = "") -> bool:
    """``kubectl auth can-i VERB RESOURCE --as WHO``: yes (exit 0) or no (exit 1)."""
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl is not installed")
    argv = [found, "auth", "can-i", verb, resource, f"--as={who}", "-n", namespace]
    if subresource:
        argv.append(f"--subresource={subresource}")
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=90, check=False,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0 and done.stdout.strip() == "yes"


def expected_for(role: str | None) -> dict[tuple[str, str], bool]:
    """(verb, resource) -> allowed, for a person bound to ``role`` (docs/security.md's table)."""
    out = {}
    for resource in ORDO:
        for verb in READS:
            out[(verb, resource)] = role is not None
        for verb in WRITES:
            out[(verb, resource)] = role in ("edit", "admin")
    return out


def reviewed(api: Any, who: str, verb: str, resource: str, namespace: str) -> bool:
    """A SubjectAccessReview: what ``kubectl auth can-i`` asks, without a process per question."""
    plural, _, group = resource.partition(".")
    spec = {"user": who, "resourceAttributes": {"verb": verb, "group": group, "resource": plural,
                                                 "namespace": namespace}}  # fmt: skip
    authorization: Any = kubernetes.client.AuthorizationV1Api(api)
    return bool(authorization.create_subject_access_review({"spec": spec}).status.allowed)


def can_matrix(api: Any, namespace: str) -> dict[str, dict[tuple[str, str], bool]]:
    """Who may do what with ordo's resources in ``namespace``."""
    return {
        who: {(verb, resource): reviewed(api, who, verb, resource, namespace)
              for resource in ORDO for verb in (*READS, *WRITES)}
        for who in PEOPLE
    }  # fmt: skip


def test_people_with_admin_edit_or_view_get_ordos_resources_through_aggregation(kube: Kube) -> None:
    """The clusterrole-aggregation controller of the testbed's kube-controller-manager folds the
    chart's <release>-ordo-admin/-edit/-view into Kubernetes' admin/edit/view: before they exist a
    namespace editor cannot create a ProducerGroup (issue 37); after, ``kubectl auth can-i`` and
    real requests as each person say what docs/security.md says."""
    ns, config = kube.namespace, kube.kubeconfig_path
    rbac: Any = kubernetes.client.RbacAuthorizationV1Api(kube.api)
    for who, role in PEOPLE.items():
        if role is not None:
            rbac.create_namespaced_role_binding(ns, {
                "metadata": {"name": f"{who}-{role}"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": who}],
            })  # fmt: skip
    wait_for(lambda: may(config, "bob", "list", "pods", ns), 30, "the bindings to take effect")
    nothing = {key: False for key in expected_for(None)}
    before = can_matrix(kube.api, ns)
    assert before == dict.fromkeys(PEOPLE, nothing), (
        "admin/edit/view granted ordo's resources without the chart"
    )

    release = f"r{uuid.uuid4().hex[:8]}"
    roles = [o for o in chart_rbac({}, release, ns) if component(o) == "user-roles"]
    assert sorted(r["metadata"]["name"] for r in roles) == [
        f"{release}-ordo-{r}" for r in ("admin", "edit", "view")
    ]
    apply_rbac(kube.api, roles)
    try:
        wanted = {who: expected_for(role) for who, role in PEOPLE.items()}
        wait_for(
            lambda: can_matrix(kube.api, ns) == wanted,
            60,
            "the aggregated admin/edit/view to grant ordo's roles",
        )
        # kubectl auth can-i agrees; status is the operator's: nobody patches it by hand
        assert may(config, "alice", "create", ORDO[0], ns) and not may(config, "bob", "create", ORDO[1], ns)
        assert may(config, "bob", "get", ORDO[0], ns, subresource="status")
        for who in PEOPLE:
            assert not may(config, who, "patch", ORDO[0], ns, subresource="status")

        group = {
            "apiVersion": "ordo.dev/v1alpha1", "kind": "ProducerGroup",
            "metadata": {"name": "orders-cdc", "namespace": ns},
            "spec": {"sourcePartitions": 4, "selector": {"matchLabels": {"app": "orders-cdc"}}},
        }  # fmt: skip
        assert "created" in kubectl(config, "--as=alice", "create", "-f", "-", stdin=json.dumps(group))
        assert "orders-cdc" in kubectl(config, "--as=bob", "get", "producergroups", "-n", ns, "-o", "name")
        refused = subprocess.run(
            [str(shutil.which("kubectl")), "--as=bob", "delete", "producergroup", "orders-cdc", "-n", ns],
            capture_output=True, text=True, timeout=90, check=False,
            env={**os.environ, "KUBECONFIG": str(config)},
        )  # fmt: skip
        assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), refused.stderr
        assert "deleted" in kubectl(config, "--as=carol", "delete", "producergroup", "orders-cdc", "-n", ns)
    finally:
        for made in roles:
            rbac.delete_cluster_role(made["metadata"]["name"])
    wait_for(lambda: not may(config, "alice", "create", ORDO[0], ns), 60, "edit to lose ordo's rules again")
