"""Launcher: fault hooks (Python and HTTP), persistence across restarts, auth, the CLI entry point."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import urllib3
from kubernetes.client import ApiException

from ordo.testbed.kube import KubeEmulator, add_remote, clear_remote

from .conftest import CRD_DIR, wait_for, widget
from .helpers import request


def test_faults_from_python(kube: Any, kube_emulator: KubeEmulator) -> None:
    core, ns = kube.core, kube.namespace
    kube_emulator.faults.add(verb="create", resource="configmaps", namespace=ns, code=500, count=2)
    for _ in range(2):
        with pytest.raises(ApiException) as e:
            core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}})
        assert e.value.status == 500
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}})

    kube_emulator.faults.add(verb="patch", resource="configmaps", name="cm", code=409, message="conflict!")
    with pytest.raises(ApiException) as e:
        core.patch_namespaced_config_map("cm", ns, {"data": {"a": "b"}})
    assert e.value.status == 409 and "conflict!" in e.value.body
    core.patch_namespaced_config_map("cm", ns, {"data": {"a": "b"}})

    # A delay longer than the client's timeout is a timeout (the client retries: delay them all).
    kube_emulator.faults.add(verb="get", resource="configmaps", code=0, delay=1.0, count=-1)
    with pytest.raises((urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.MaxRetryError)):
        core.read_namespaced_config_map("cm", ns, _request_timeout=0.2)
    kube_emulator.faults.clear()
    assert core.read_namespaced_config_map("cm", ns).data == {"a": "b"}


def test_faults_from_another_process(kube: Any, kube_emulator: KubeEmulator) -> None:
    add_remote(kube_emulator.url, kube_emulator.token, verb="list", resource="pods", code=503, count=-1)
    for _ in range(3):
        with pytest.raises(ApiException) as e:
            kube.core.list_namespaced_pod(kube.namespace)
        assert e.value.status == 503
    assert [f["hits"] for f in kube_emulator.faults.list()] == [3]
    clear_remote(kube_emulator.url, kube_emulator.token)
    assert kube.core.list_namespaced_pod(kube.namespace).items == []


def test_requests_without_the_token_are_401(kube: Any, kube_emulator: KubeEmulator) -> None:
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{kube_emulator.url}/api/v1/namespaces", timeout=5)
    assert e.value.code == 401
    assert request(kube.kubeconfig_path, "GET", "/api/v1/namespaces")[0] == 200
    with urllib.request.urlopen(
        f"{kube_emulator.url}/healthz", timeout=5
    ) as rsp:  # public, as on real servers
        assert rsp.read() == b"ok"


def test_state_access_from_tests(kube: Any, kube_emulator: KubeEmulator) -> None:
    kube.core.create_namespaced_config_map(kube.namespace, {"metadata": {"name": "cm"}})
    names = kube_emulator.call(
        lambda c: [o["metadata"]["name"] for o in c.store.items("configmaps", kube.namespace)]
    )
    assert names == ["cm"]


def test_state_survives_restart(tmp_path: Path) -> None:
    with KubeEmulator(state_dir=tmp_path, crd_dirs=[CRD_DIR]) as first:
        api = kubernetes.config.new_client_from_config(str(first.kubeconfig_path))
        co = kubernetes.client.CustomObjectsApi(api)
        created = co.create_namespaced_custom_object(
            "testbed.ordo.dev", "v1", "default", "widgets", widget("w")
        )
        kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": "kept"}})
        api.close()
    with KubeEmulator(state_dir=tmp_path, crd_dirs=[]) as second:  # the CRD comes back from the state
        api = kubernetes.config.new_client_from_config(str(second.kubeconfig_path))
        co = kubernetes.client.CustomObjectsApi(api)
        again = co.get_namespaced_custom_object("testbed.ordo.dev", "v1", "default", "widgets", "w")
        assert again["metadata"]["uid"] == created["metadata"]["uid"]
        assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        kubernetes.client.CoreV1Api(api).read_namespace("kept")
        newer = co.create_namespaced_custom_object(
            "testbed.ordo.dev", "v1", "default", "widgets", widget("w2")
        )
        assert int(newer["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
        api.close()


def test_foreground_cli(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "ordo.testbed.kube",
        "--port",
        "0",
        "--state-dir",
        str(tmp_path),
        "--crds",
        str(CRD_DIR),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "kube emulator at http://127.0.0.1:" in line, proc.stderr.read() if proc.stderr else ""
        api = kubernetes.config.new_client_from_config(str(tmp_path / "kubeconfig"))
        kubernetes.client.CoreV1Api(api).create_namespaced_config_map("default", {"metadata": {"name": "x"}})
        api.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        assert wait_for(lambda: (tmp_path / "kube-state.json").exists())
        assert '"x"' in (tmp_path / "kube-state.json").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
