"""ProducerGroup members simulated through the Kubernetes API alone, for sizes no member processes
fit on one machine: each member is a Pod (bound to a fake node, made Ready through its status, as
``ordo_testbed.pods`` does) and a Lease named after it, written the way
``ordo.group.membership.Membership`` writes them. One watch over the members' pods acknowledges
every new assignment at once (a member that applies it instantly); renewals run at the SDK's pace
(every session / 3) when asked to. Also: the API server's request counts, from its /metrics.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes import watch

from ordo.member_wire import ACK_ANNOTATION, ASSIGNMENT_ANNOTATION, GROUP_LABEL, MemberAssignment, lease_name
from ordo_testbed.pods import NODE_NAME

__all__ = ["SimulatedMembers", "api_client", "request_counts"]

WORKERS = 8  # concurrent API calls of the simulator: 1,000 members are set up in seconds, not minutes
_REQUEST = re.compile(r"^apiserver_request_total\{(.*)\} ([0-9.e+]+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def api_client(kubeconfig: Path) -> Any:
    """An API client whose connection pool serves ``WORKERS`` threads."""
    configuration = kubernetes.client.Configuration()
    loader: Any = kubernetes.config
    loader.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = WORKERS * 2
    return kubernetes.client.ApiClient(configuration)


def request_counts(api: Any) -> Counter[tuple[str, str, str]]:
    """kube-apiserver's ``apiserver_request_total`` so far, by (verb, resource, subresource)."""
    text = api.call_api("GET", f"{api.configuration.host}/metrics").read().decode()
    counts: Counter[tuple[str, str, str]] = Counter()
    for line in text.splitlines():
        found = _REQUEST.match(line)
        if found is not None:
            labels = dict(_LABEL.findall(found.group(1)))
            key = (labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", ""))
            counts[key] += int(float(found.group(2)))
    return counts


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_READY = [{"type": t, "status": "True"} for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]


class SimulatedMembers:
    """The members of group ``group`` in ``namespace`` (pods labelled ``app=<group>``)."""

    def __init__(self, api: Any, namespace: str, group: str, session_seconds: int) -> None:
        self.core: Any = kubernetes.client.CoreV1Api(api)
        self.leases: Any = kubernetes.client.CoordinationV1Api(api)
        self.namespace, self.group, self.session = namespace, group, session_seconds
        self.names: list[str] = []
        self.acked: dict[str, int] = {}
        self._pool = ThreadPoolExecutor(WORKERS)
        self._stop = threading.Event()
        self._renewing = threading.Event()
        self.renewals = 0
        self._watcher = threading.Thread(target=self._acknowledge, name="sim-acks", daemon=True)
        self._renewer = threading.Thread(target=self._renew, name="sim-renewals", daemon=True)
        self._watcher.start()
        self._renewer.start()

    # -- membership changes -------------------------------------------------------------------

    def add(self, names: Iterable[str]) -> None:
        """Pods Ready with fresh Leases, as many at once as the worker threads allow."""
        added = list(names)
        self.names += added  # before their pods exist: the operator may assign them at once
        list(self._pool.map(self._add_one, added))

    def _add_one(self, name: str) -> None:
        spec = {"nodeName": NODE_NAME, "containers": [{"name": "main", "image": "simulated-member"}]}
        metadata = {"name": name, "labels": {"app": self.group, GROUP_LABEL: self.group}}
        self.core.create_namespaced_pod(self.namespace, {"metadata": metadata, "spec": spec})
        status = {"phase": "Running", "podIP": "127.0.0.1", "conditions": _READY}
        self.core.patch_namespaced_pod_status(name, self.namespace, {"status": status})
        lease = {
            "metadata": {"name": lease_name(name), "labels": {GROUP_LABEL: self.group}},
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": self.session,
                "renewTime": _micro_time(),
            },
        }
        self.leases.create_namespaced_lease(self.namespace, lease)

    def leave(self, name: str) -> None:
        """A graceful leave: the Lease names no holder (``Membership.release``)."""
        self.names.remove(name)
        patch = {"spec": {"holderIdentity": None, "renewTime": None}}
        self.leases.patch_namespaced_lease(lease_name(name), self.namespace, patch)

    def crash(self, name: str) -> None:
        """A crash: the pod turns not Ready, as its kubelet reports it."""
        self.names.remove(name)
        ready = [{**c, "status": "False"} if c["type"] == "Ready" else c for c in _READY]
        self.core.patch_namespaced_pod_status(name, self.namespace, {"status": {"conditions": ready}})

    # -- what members do by themselves --------------------------------------------------------

    def renew(self, on: bool) -> None:
        """Renew every member's Lease each session / 3, spread evenly (the SDK's pace), or stop."""
        if on:
            self._renewing.set()
        else:
            self._renewing.clear()

    def _renew(self) -> None:
        while not self._stop.is_set():
            self._renewing.wait(0.5)
            if not self._renewing.is_set() or not self.names:
                continue
            gap = self.session / 3 / len(self.names)
            began = time.monotonic()
            for i, name in enumerate(list(self.names)):
                due = began + i * gap
                if self._stop.wait(max(0.0, due - time.monotonic())) or not self._renewing.is_set():
                    break
                self._pool.submit(self._patch_lease, name, {"spec": {"renewTime": _micro_time()}})
                self.renewals += 1
            else:  # the next round a session / 3 after this one began (with few members, at once)
                self._stop.wait(max(0.0, began + self.session / 3 - time.monotonic()))

    def _acknowledge(self) -> None:
        """Acknowledge each member's newest assignment as soon as it is written."""
        selector = f"app={self.group}"
        while not self._stop.is_set():
            try:
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    self.core.list_namespaced_pod, self.namespace, label_selector=selector, timeout_seconds=5
                )
                for event in stream:
                    pod = event["object"]
                    value = (pod.metadata.annotations or {}).get(ASSIGNMENT_ANNOTATION)
                    if value is None or pod.metadata.name not in self.names:
                        continue
                    generation = MemberAssignment.from_annotation(value).generation
                    if generation > self.acked.get(pod.metadata.name, -1):
                        self.acked[pod.metadata.name] = generation
                        patch = {"metadata": {"annotations": {ACK_ANNOTATION: str(generation)}},
                                 "spec": {"renewTime": _micro_time()}}  # fmt: skip
                        self._pool.submit(self._patch_lease, pod.metadata.name, patch)
            except Exception:  # the watch ended badly (the server restarting): watch again
                if self._stop.wait(0.2):
                    return

    def _patch_lease(self, name: str, patch: dict[str, Any]) -> None:
        self.leases.patch_namespaced_lease(lease_name(name), self.namespace, patch)

    def close(self) -> None:
        self._stop.set()
        self._renewing.set()
        self._watcher.join(10)
        self._renewer.join(10)
        self._pool.shutdown(wait=True)
