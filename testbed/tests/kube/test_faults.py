"""The fault proxy in front of the testbed's API server: errors, late answers, cut watches, and
requests passed through unchanged (with the caller's own token when it has one)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from ordo_testbed.kube import KubeApiServer
from ordo_testbed.kube.faults import FaultProxy, classify
from ordo_testbed.kube.fixtures import Kube


@pytest.fixture
def proxy(kube_server: KubeApiServer) -> Iterator[FaultProxy]:
    with FaultProxy(kube_server) as running:
        yield running


def through(proxy: FaultProxy) -> Any:
    return kubernetes.client.CoreV1Api(
        kubernetes.config.new_client_from_config(str(proxy.kubeconfig_path))  # type: ignore[no-untyped-call]
    )


def test_requests_are_classified_as_the_api_server_names_them() -> None:
    assert classify("GET", "/api/v1/namespaces/n/pods", watch=True) == ("watch", "pods", "n", None)
    assert classify("PATCH", "/api/v1/namespaces/n/pods/p/status", watch=False) == (
        "patch", "pods/status", "n", "p",
    )  # fmt: skip
    assert classify("DELETE", "/apis/ordo.dev/v1alpha1/namespaces/n/producergroups", watch=False) == (
        "deletecollection", "producergroups", "n", None,
    )  # fmt: skip
    assert classify("GET", "/api/v1/namespaces/n", watch=False) == ("get", "namespaces", None, "n")
    assert classify("GET", "/readyz", watch=False) is None


def test_errors_then_success(kube: Kube, proxy: FaultProxy) -> None:
    core = through(proxy)
    fault = proxy.faults.add(
        verb="create", resource="configmaps", namespace=kube.namespace, code=503, count=2
    )
    body = {"metadata": {"name": "cm"}}
    for _ in range(2):
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_config_map(kube.namespace, body)
        assert refused.value.status == 503
    core.create_namespaced_config_map(kube.namespace, body)
    assert fault.hits == 2
    assert kube.core.read_namespaced_config_map("cm", kube.namespace).metadata.name == "cm"


def test_a_late_answer(kube: Kube, proxy: FaultProxy) -> None:
    core = through(proxy)
    proxy.faults.add(verb="list", resource="configmaps", namespace=kube.namespace, code=0, delay=1.0)
    began = time.monotonic()
    core.list_namespaced_config_map(kube.namespace)
    assert time.monotonic() - began >= 1.0


def test_a_dropped_watch_ends_at_once_and_the_next_one_goes_on(kube: Kube, proxy: FaultProxy) -> None:
    core = through(proxy)
    for name in ("a", "b", "c"):
        kube.core.create_namespaced_config_map(kube.namespace, {"metadata": {"name": name}})
    drop = proxy.faults.add(verb="watch", resource="configmaps", namespace=kube.namespace, code=0, drop=True)
    cut = kubernetes.watch.Watch().stream(  # type: ignore[no-untyped-call]
        core.list_namespaced_config_map, kube.namespace, timeout_seconds=20, _request_timeout=30
    )
    # ended by the proxy with no events: a watch the server served would list a, b and c first
    assert [event["object"].metadata.name for event in cut] == []
    assert drop.hits == 1
    watch: Any = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
    whole = watch.stream(core.list_namespaced_config_map, kube.namespace, timeout_seconds=2)
    assert sorted(event["object"].metadata.name for event in whole) == ["a", "b", "c"]


def test_a_bearer_token_is_passed_on(kube: Kube, proxy: FaultProxy) -> None:
    """A caller with a token stays who it is: a service account without a Role is refused."""
    kube.core.create_namespaced_service_account(kube.namespace, {"metadata": {"name": "nobody"}})
    token = kube.core.create_namespaced_service_account_token(
        "nobody", kube.namespace, {"spec": {"expirationSeconds": 600}}
    ).status.token
    configuration = kubernetes.client.Configuration()
    configuration.host = f"https://127.0.0.1:{proxy.port}"
    configuration.ssl_ca_cert = str(proxy.server.pki.path("ca.crt"))
    configuration.api_key = {"authorization": f"Bearer {token}"}
    with kubernetes.client.ApiClient(configuration) as api, pytest.raises(ApiException) as refused:
        kubernetes.client.CoreV1Api(api).list_namespaced_pod(kube.namespace)
    assert refused.value.status == 403 and f":{kube.namespace}:nobody" in str(refused.value.body)
