"""Watches: initial state, resumption, selectors (with enter/leave transitions), timeouts,
bookmarks and 410 Gone."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from ordo.testbed.kube import KubeEmulator

from .helpers import Collector, stream


def cm(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def test_initial_state_then_live_events(kube: Any) -> None:
    core, ns = kube.core, kube.namespace
    core.create_namespaced_config_map(ns, cm("before"))
    watch = Collector(core.list_namespaced_config_map, ns, timeout_seconds=5)
    try:
        watch.wait(("ADDED", "before"))
        core.create_namespaced_config_map(ns, cm("after"))
        core.patch_namespaced_config_map("after", ns, {"data": {"k": "v"}})
        core.delete_namespaced_config_map("after", ns)
        watch.wait(("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after"))
        assert watch.events == [
            ("ADDED", "before"),
            ("ADDED", "after"),
            ("MODIFIED", "after"),
            ("DELETED", "after"),
        ]
    finally:
        watch.stop()


def test_resume_from_resource_version(kube: Any) -> None:
    core, ns = kube.core, kube.namespace
    first = core.create_namespaced_config_map(ns, cm("a"))
    core.create_namespaced_config_map(ns, cm("b"))
    core.delete_namespaced_config_map("a", ns)
    rv = first.metadata.resource_version
    path = f"/api/v1/namespaces/{ns}/configmaps?watch=true&timeoutSeconds=1&resourceVersion={rv}"
    events = [(e["type"], e["object"]["metadata"]["name"]) for e in stream(kube.kubeconfig_path, path)]
    assert events == [("ADDED", "b"), ("DELETED", "a")]


def test_label_selector_on_watch_turns_changes_into_enter_and_leave(kube: Any) -> None:
    core, ns = kube.core, kube.namespace
    watch = Collector(core.list_namespaced_config_map, ns, label_selector="app in (x)", timeout_seconds=5)
    try:
        core.create_namespaced_config_map(ns, cm("c", app="y"))
        core.patch_namespaced_config_map("c", ns, {"metadata": {"labels": {"app": "x"}}})
        core.patch_namespaced_config_map("c", ns, {"data": {"k": "v"}})
        core.patch_namespaced_config_map("c", ns, {"metadata": {"labels": {"app": "z"}}})
        watch.wait(("ADDED", "c"), ("MODIFIED", "c"), ("DELETED", "c"))
        assert watch.events == [("ADDED", "c"), ("MODIFIED", "c"), ("DELETED", "c")]
    finally:
        watch.stop()


def test_field_selector_on_list_and_watch(kube: Any) -> None:
    core, ns = kube.core, kube.namespace
    for name in ("a", "b"):
        core.create_namespaced_config_map(ns, cm(name))
    listed = core.list_namespaced_config_map(ns, field_selector="metadata.name=b").items
    assert [c.metadata.name for c in listed] == ["b"]
    path = f"/api/v1/namespaces/{ns}/configmaps?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Da"
    assert [e["object"]["metadata"]["name"] for e in stream(kube.kubeconfig_path, path)] == ["a"]
    everywhere = core.list_config_map_for_all_namespaces(field_selector=f"metadata.namespace={ns}").items
    assert sorted(c.metadata.name for c in everywhere) == ["a", "b"]


def test_timeout_ends_stream_with_bookmark(kube: Any) -> None:
    core, ns = kube.core, kube.namespace
    core.create_namespaced_config_map(ns, cm("a"))
    path = f"/api/v1/namespaces/{ns}/configmaps?watch=true&timeoutSeconds=1&allowWatchBookmarks=true"
    start = time.monotonic()
    events = list(stream(kube.kubeconfig_path, path))
    assert time.monotonic() - start < 5
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert int(events[-1]["object"]["metadata"]["resourceVersion"]) >= int(
        events[0]["object"]["metadata"]["resourceVersion"]
    )


def test_send_initial_events_ends_with_marked_bookmark(kube: Any) -> None:
    kube.core.create_namespaced_config_map(kube.namespace, cm("a"))
    path = (
        f"/api/v1/namespaces/{kube.namespace}/configmaps?watch=true&timeoutSeconds=1&allowWatchBookmarks=true"
        "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
    )
    events = list(stream(kube.kubeconfig_path, path))
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


@pytest.fixture
def small() -> Iterator[KubeEmulator]:
    """An emulator of its own with a tiny history and frequent bookmarks."""
    with KubeEmulator(history=5, bookmark_interval=0.2, crd_dirs=[]) as emulator:
        yield emulator


def test_periodic_bookmarks(small: KubeEmulator) -> None:
    path = "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1&allowWatchBookmarks=true"
    types = [e["type"] for e in stream(small.kubeconfig_path, path)]
    assert types.count("BOOKMARK") >= 2


def test_too_old_resource_version_is_410(small: KubeEmulator) -> None:
    api = kubernetes.config.new_client_from_config(str(small.kubeconfig_path))
    core = kubernetes.client.CoreV1Api(api)
    first = core.create_namespaced_config_map("default", cm("c0"))
    for i in range(1, 20):
        core.create_namespaced_config_map("default", cm(f"c{i}"))
    path = (
        f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={first.metadata.resource_version}"
    )
    events = list(stream(small.kubeconfig_path, path))
    assert [(e["type"], e["object"]["code"], e["object"]["reason"]) for e in events] == [
        ("ERROR", 410, "Expired")
    ]
    with pytest.raises(ApiException) as e:
        for _ in kubernetes.watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=first.metadata.resource_version
        ):
            pass
    assert e.value.status == 410
    recent = core.list_namespaced_config_map("default").metadata.resource_version
    path = f"/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1&resourceVersion={recent}"
    assert list(stream(small.kubeconfig_path, path)) == []
    api.close()


def test_many_watchers_each_get_every_event(kube: Any) -> None:
    path = f"/api/v1/namespaces/{kube.namespace}/configmaps?watch=true&timeoutSeconds=2&resourceVersion="
    rv = kube.core.list_namespaced_config_map(kube.namespace).metadata.resource_version
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        futures = [
            pool.submit(lambda: [e["type"] for e in stream(kube.kubeconfig_path, path + rv)])
            for _ in range(20)
        ]
        for i in range(5):
            kube.core.create_namespaced_config_map(kube.namespace, cm(f"c{i}"))
        results = [f.result() for f in futures]
    assert all(r == ["ADDED"] * 5 for r in results)
