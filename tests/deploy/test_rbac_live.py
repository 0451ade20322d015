"""The chart's RBAC under real authorization: its ServiceAccounts, ClusterRoles, Roles and bindings
applied to the testbed's kube-apiserver (RBAC on), ``kubectl auth can-i --list`` for the operator
and for members compared with docs/security.md, and the operator and a member run under those
identities through an expansion and a ProducerGroup handoff, with nothing refused."""

from __future__ import annotations

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

from .chart import ROOT

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
    values = {**request.param(kube.namespace), "memberRbac": {"create": True, "namespaces": [kube.namespace]}}
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
