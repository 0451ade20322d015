"""kopf, unmodified, against the emulator: create -> handler -> status patch; delete -> finalizer
removed -> object gone; timers, indexes and posted Events; reaction time measured."""

from __future__ import annotations

import asyncio
import logging
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

import kopf
import pytest
from kubernetes.client import ApiException

from .conftest import wait_for, widget
from .helpers import endpoint

pytestmark = pytest.mark.usefixtures("test_crds")
G, V, W = "testbed.ordo.dev", "v1", "widgets"


class Operator:
    """A tiny kopf operator for Widgets, run in a thread with its own loop."""

    def __init__(self, kube: Any):
        self.kube = kube
        self.deleted: list[str] = []
        self.registry = kopf.OperatorRegistry()
        self.stop_flag = threading.Event()
        self.ready_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kopf", daemon=True)
        self._define()

    def _define(self) -> None:
        host, port, auth = endpoint(self.kube.kubeconfig_path)
        token = auth.get("Authorization", "").removeprefix("Bearer ") or None
        reg = self.registry

        @kopf.on.startup(registry=reg)
        def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
            settings.posting.loggers = True
            settings.posting.level = 20  # INFO
            settings.watching.server_timeout = 60
            settings.queueing.idle_timeout = 0.5  # workers linger this long at exit

        @kopf.on.login(registry=reg)
        def login(**_: Any) -> kopf.ConnectionInfo:
            return kopf.ConnectionInfo(server=f"http://{host}:{port}", token=token, scheme="Bearer")

        @kopf.index(G, W, id="by_topic", registry=reg)
        def by_topic(name: str, spec: kopf.Spec, **_: Any) -> dict[str, str]:
            return {spec["topic"]: name}

        @kopf.on.create(G, W, registry=reg)
        def created(
            name: str,
            spec: kopf.Spec,
            patch: kopf.Patch,
            logger: Any,
            by_topic: kopf.Index[str, str],
            **_: Any,
        ) -> None:
            logger.info(f"widget {name} of size {spec['size']} created")
            patch.status["phase"] = "Ready"
            patch.status["peers"] = len(list(by_topic.get(spec["topic"], [])))

        @kopf.on.delete(G, W, registry=reg)
        def deleted(name: str, **_: Any) -> None:
            self.deleted.append(name)

        @kopf.timer(G, W, interval=0.2, registry=reg)
        def tick(status: kopf.Status, patch: kopf.Patch, **_: Any) -> None:
            patch.status["observed"] = (status.get("observed") or 0) + 1

    def _run(self) -> None:
        asyncio.run(
            kopf.operator(
                registry=self.registry,
                standalone=True,
                namespaces=[self.kube.namespace],
                stop_flag=self.stop_flag,
                ready_flag=self.ready_flag,
            )
        )

    def __enter__(self) -> Operator:
        # `kopf run` configures logging; kopf.operator() does not, and INFO records would be
        # dropped by the logger before kopf's Event poster sees them.
        self._level = logging.getLogger("kopf.objects").level
        logging.getLogger("kopf.objects").setLevel(logging.INFO)
        self.thread.start()
        assert self.ready_flag.wait(30), "kopf did not start"
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop_flag.set()
        self.thread.join(30)
        logging.getLogger("kopf.objects").setLevel(self._level)


@pytest.fixture
def operator(kube: Any) -> Iterator[Operator]:
    with Operator(kube) as op:
        yield op


def get(kube: Any, name: str) -> Any:
    return kube.custom.get_namespaced_custom_object(G, V, kube.namespace, W, name)


def test_kopf_full_path(kube: Any, operator: Operator) -> None:
    co, ns = kube.custom, kube.namespace
    co.create_namespaced_custom_object(G, V, ns, W, widget("w1", topic="orders"))
    obj = wait_for(
        lambda: (o := get(kube, "w1")).get("status", {}).get("phase") == "Ready" and o, 20, "status"
    )
    assert obj["metadata"]["finalizers"] == ["kopf.zalando.org/KopfFinalizerMarker"]
    co.create_namespaced_custom_object(G, V, ns, W, widget("w2", topic="orders"))
    wait_for(lambda: get(kube, "w2").get("status", {}).get("peers") == 2, 20, "index seen by handler")
    wait_for(lambda: (get(kube, "w1").get("status", {}).get("observed") or 0) >= 3, 20, "timer ticks")

    def events() -> list[str]:
        listed = kube.core.list_namespaced_event(ns, field_selector="involvedObject.name=w1").items
        return [e.message for e in listed]

    wait_for(lambda: "widget w1 of size 3 created" in events(), 20, "the handler's log posted as an Event")

    co.delete_namespaced_custom_object(G, V, ns, W, "w1")

    def w1_gone() -> bool:
        try:
            get(kube, "w1")
        except ApiException as e:
            return e.status == 404
        return False

    wait_for(w1_gone, 20, "object removed after its finalizer")
    assert operator.deleted == ["w1"]


def test_kopf_reaction_time(kube: Any, operator: Operator) -> None:
    co, ns = kube.custom, kube.namespace
    co.create_namespaced_custom_object(G, V, ns, W, widget("warmup"))
    wait_for(lambda: get(kube, "warmup").get("status", {}).get("phase") == "Ready", 20, "warm-up")
    delays = []
    for i in range(15):
        start = time.perf_counter()
        co.create_namespaced_custom_object(G, V, ns, W, widget(f"r{i}"))
        deadline = start + 20
        while get(kube, f"r{i}").get("status", {}).get("phase") != "Ready":
            assert time.perf_counter() < deadline, "no reaction"
        delays.append(time.perf_counter() - start)
    median = statistics.median(delays)
    print(f"\nkopf create -> status visible: median {median * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms")
    assert median < 0.5  # the target is < 100 ms; the floor is generous for loaded CI machines
