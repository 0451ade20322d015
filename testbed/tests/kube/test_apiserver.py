"""The testbed's Kubernetes: a real kube-apiserver (with etcd and two controllers) that kubectl,
the official client and service-account identities use as they would a cluster's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from ordo_testbed.kube import KubeApiServer
from ordo_testbed.kube.binaries import kube_version
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.usefixtures("kube_server")
KUBECTL = shutil.which("kubectl")


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    return subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, timeout=60, check=False)


def test_kubectl_reports_the_servers_version(kube: Kube) -> None:
    done = kubectl(kube.kubeconfig_path, "version", "-o", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["serverVersion"]["gitVersion"] == f"v{kube_version()}"


def test_a_service_account_may_do_what_rbac_grants_it_and_nothing_else(kube: Kube) -> None:
    core: Any = kube.core
    rbac: Any = kubernetes.client.RbacAuthorizationV1Api(kube.api)
    core.create_namespaced_service_account(kube.namespace, {"metadata": {"name": "reader"}})
    token = core.create_namespaced_service_account_token(
        "reader", kube.namespace, {"spec": {"expirationSeconds": 600}}
    ).status.token
    configuration = kubernetes.client.Configuration()
    configuration.host = kube.api.configuration.host
    configuration.ssl_ca_cert = kube.api.configuration.ssl_ca_cert
    configuration.api_key = {"authorization": f"Bearer {token}"}
    with kubernetes.client.ApiClient(configuration) as as_reader:
        reader: Any = kubernetes.client.CoreV1Api(as_reader)
        with pytest.raises(ApiException) as refused:
            reader.list_namespaced_config_map(kube.namespace)
        assert refused.value.status == 403
        assert f"system:serviceaccount:{kube.namespace}:reader" in str(refused.value.body)
        rbac.create_namespaced_role(kube.namespace, {
            "metadata": {"name": "read-configmaps"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
        })  # fmt: skip
        rbac.create_namespaced_role_binding(kube.namespace, {
            "metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-configmaps"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": kube.namespace}],
        })  # fmt: skip

        def allowed() -> bool:
            try:
                reader.list_namespaced_config_map(kube.namespace)
            except ApiException as error:
                assert error.status == 403
                return False
            return True

        wait_for(allowed, 30, "the RoleBinding to take effect")
        with pytest.raises(ApiException) as still_refused:
            reader.list_namespaced_secret(kube.namespace)
        assert still_refused.value.status == 403


def test_a_deleted_namespace_and_an_owners_dependents_go(kube: Kube) -> None:
    """The namespace and garbage collectors run: nothing is left behind as it would be with only
    an API server (a namespace stays Terminating, a Lease outlives its Pod)."""
    core: Any = kube.core
    leases: Any = kubernetes.client.CoordinationV1Api(kube.api)
    pod = core.create_namespaced_pod(kube.namespace, {
        "metadata": {"name": "owner"}, "spec": {"containers": [{"name": "main", "image": "none"}]},
    })  # fmt: skip
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "owner", "uid": pod.metadata.uid}
    leases.create_namespaced_lease(
        kube.namespace, {"metadata": {"name": "owned", "ownerReferences": [owner]}}
    )
    core.delete_namespaced_pod("owner", kube.namespace)  # not bound to a node: removed at once

    def gone(read: Any, *args: str) -> bool:
        try:
            read(*args)
        except ApiException as error:
            return bool(error.status == 404)
        return False

    wait_for(lambda: gone(leases.read_namespaced_lease, "owned", kube.namespace), 60, "the Lease collected")
    spare = f"{kube.namespace}-x"
    core.create_namespace({"metadata": {"name": spare}})
    core.create_namespaced_config_map(spare, {"metadata": {"name": "content"}})
    core.delete_namespace(spare)
    wait_for(lambda: gone(core.read_namespace, spare), 60, f"namespace {spare} to be removed")


def test_state_survives_a_restart(tmp_path: Path) -> None:
    with KubeApiServer(state_dir=tmp_path, crd_dirs=[]) as first:
        api: Any = kubernetes.config.new_client_from_config(str(first.kubeconfig_path))  # type: ignore[no-untyped-call]
        core: Any = kubernetes.client.CoreV1Api(api)
        core.create_namespaced_config_map("default", {"metadata": {"name": "kept"}, "data": {"a": "1"}})
        api.close()
        print(f"\nkube-apiserver ready in {first.startup_seconds:.1f} s")
    with KubeApiServer(state_dir=tmp_path, crd_dirs=[]) as second:
        api = kubernetes.config.new_client_from_config(str(second.kubeconfig_path))  # type: ignore[no-untyped-call]
        kept = kubernetes.client.CoreV1Api(api).read_namespaced_config_map("kept", "default")
        api.close()
        assert kept.data == {"a": "1"}
    assert not any(p.name.endswith(".partial") for p in (tmp_path / "pki").iterdir())
