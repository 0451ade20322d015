"""pytest fixtures for the Kubernetes side of the testbed (usable as a plugin:
``pytest_plugins = ["ordo_testbed.kube.fixtures"]``).

- ``kube_cluster`` (session): a started :class:`KubeApiServer` (etcd and kube-apiserver on this
  machine, no nodes), or a real cluster when ``ORDO_TEST_KUBECONFIG`` is set.
- ``kube_server``: that local server itself; tests using it (pods as local processes, faults)
  are skipped against a real cluster.
- ``kube``: a :class:`Kube` handle with an API client and a fresh namespace, deleted afterwards.
- ``pods``: a :class:`~ordo_testbed.pods.PodSet` in that namespace that kills what it started;
  on the testbed its processes use the ServiceAccount the chart gives members (``memberRbac``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ordo_testbed.kube.apiserver import KubeApiServer
from ordo_testbed.kube.identity import member_identity

ENV_KUBECONFIG = "ORDO_TEST_KUBECONFIG"


@dataclass
class KubeCluster:
    kubeconfig_path: Path
    server: KubeApiServer | None  # None: a real cluster

    def client(self) -> Any:
        import kubernetes

        config: Any = kubernetes.config  # partly typed: keep mypy out of it
        return config.new_client_from_config(str(self.kubeconfig_path))


@dataclass
class Kube:
    """What a test needs to talk to the cluster: a client, the kubeconfig and its own namespace."""

    api: Any  # kubernetes.client.ApiClient
    kubeconfig_path: Path
    namespace: str
    server: KubeApiServer | None  # None: a real cluster

    def event_reasons(self) -> list[str]:
        """The reasons of the Events in this test's namespace (kopf posts them in the background:
        wait for them rather than expect them at once)."""
        return [e.reason for e in self.events()]

    def events(self, reason: str | None = None) -> list[Any]:
        """This test's namespace's Events (``V1Event``), those with ``reason`` if given."""
        events = self.core.list_namespaced_event(self.namespace).items
        return [e for e in events if reason is None or e.reason == reason]

    @property
    def core(self) -> Any:
        import kubernetes

        return kubernetes.client.CoreV1Api(self.api)

    @property
    def custom(self) -> Any:
        import kubernetes

        return kubernetes.client.CustomObjectsApi(self.api)


@pytest.fixture(scope="session")
def kube_cluster() -> Iterator[KubeCluster]:
    real = os.environ.get(ENV_KUBECONFIG)
    if real:
        yield KubeCluster(Path(real), None)
        return
    with KubeApiServer() as server:
        yield KubeCluster(server.kubeconfig_path, server)


@pytest.fixture
def kube_server(kube_cluster: KubeCluster) -> KubeApiServer:
    if kube_cluster.server is None:
        pytest.skip(f"a test of the local API server ({ENV_KUBECONFIG} points to a real cluster)")
    return kube_cluster.server


@pytest.fixture
def kube(kube_cluster: KubeCluster) -> Iterator[Kube]:
    import kubernetes

    api = kube_cluster.client()
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    core: Any = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace, "labels": {"ordo.dev/test": "true"}}})
    try:
        yield Kube(api, kube_cluster.kubeconfig_path, namespace, kube_cluster.server)
    finally:
        try:
            core.delete_namespace(namespace)
        except kubernetes.client.ApiException as e:
            if e.status != 404:
                raise
        api.close()


@pytest.fixture
def pods(kube: Kube, tmp_path: Path) -> Iterator[Any]:
    from ordo_testbed.pods import PLACEHOLDER_IMAGE, PodSet

    # on a real cluster (ENV_KUBECONFIG) each process is bound to a placeholder Pod the cluster runs
    placeholder = PLACEHOLDER_IMAGE if kube.server is None else None
    identity = None  # on the testbed, the processes are who the chart's memberRbac makes them
    if kube.server is not None:
        with contextlib.suppress(ImportError):  # rendering the chart needs the dev extra
            identity = member_identity(kube.server, kube.api, kube.namespace, tmp_path)
    podset = PodSet(
        kube.kubeconfig_path, kube.namespace, log_dir=tmp_path / "pods", placeholder_image=placeholder,
        process_kubeconfig=identity,
    )  # fmt: skip
    try:
        yield podset
    finally:
        podset.close()


def kubectl(kube: Kube, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real kubectl against this test's API server and namespace (skips the test without it)."""
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl is not installed")
    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig_path)}
    return subprocess.run(
        [found, "--namespace", kube.namespace, *args],
        input=stdin, capture_output=True, text=True, env=env, timeout=90, check=False,
    )  # fmt: skip
