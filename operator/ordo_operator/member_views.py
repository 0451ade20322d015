"""Every watched namespace's pods and member Leases in memory, for the ProducerGroup passes.

kopf's watches (the event handlers in ``producer_groups``) feed them; a group's daemon LISTs its
pods and Leases once before its first pass, when its selector changes, after a write found a pod
gone, and every ``RELIST_SECONDS`` (see ``GroupViews``). Only pods labelled ``ordo.dev/group``
are watched and listed (a member pod's label, its group's name as value): a pod that the selector
matches but without it is no member.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client import CoordinationV1Api, CoreV1Api

from ordo.api.common import LabelSelector
from ordo.member_wire import GROUP_LABEL

from .plans.group import LeaseView, PodView
from .plans.objects import lease_listed, pod_listed
from .plans.watch_cache import WatchCache, revision_of

__all__ = ["GroupViews", "list_items", "observe_lease", "observe_pod"]

RELIST_SECONDS = 30.0
"""A safety net, not the source: an event kopf missed (a watch that broke and resumed past a
change) or a Lease whose group label was removed (no handler sees it) is set right within this."""

PODS: WatchCache[PodView] = WatchCache()
LEASES: WatchCache[LeaseView] = WatchCache(significant=lambda lease: (lease.holder, lease.acked))


def observe_pod(namespace: str, pod: Mapping[str, Any], deleted: bool = False) -> bool:
    """Apply a pod's watch event (or a write's response); whether it changed anything significant."""
    if deleted:
        return _forget(PODS, namespace, pod)
    return PODS.put(namespace, pod_listed(pod), time.monotonic())


def observe_lease(namespace: str, lease: Mapping[str, Any], deleted: bool) -> bool:
    """Apply a Lease's watch event; whether it changed more than its renewTime."""
    if deleted:
        return _forget(LEASES, namespace, lease)
    return LEASES.put(namespace, lease_listed(lease), time.monotonic())


def _forget(cache: WatchCache[Any], namespace: str, body: Mapping[str, Any]) -> bool:
    meta = body["metadata"]
    return cache.delete(namespace, meta["name"], revision_of(meta.get("resourceVersion")), time.monotonic())


def list_items(list_call: Any, *args: Any, **kwargs: Any) -> tuple[list[dict[str, Any]], int | None]:
    """A list call's items as plain JSON objects (the typed models cost time and say nothing
    more), and the revision the list was read at."""
    response = json.loads(list_call(*args, _preload_content=False, **kwargs).data)
    return list(response["items"]), revision_of(response["metadata"].get("resourceVersion"))


class GroupViews:
    """One group's pods and Leases from the caches, LISTed afresh when due."""

    def __init__(self, core: CoreV1Api, coordination: CoordinationV1Api, namespace: str, group: str) -> None:
        self.core, self.coordination, self.namespace, self.group = core, coordination, namespace, group
        self._listed_selector: LabelSelector | None = None
        self._listed_at = 0.0
        self._relist = True

    def relist_soon(self) -> None:
        self._relist = True

    def refresh(self, selector: LabelSelector) -> None:
        """LIST the group's pods and Leases if it is due: never listed, a new selector, asked for,
        or ``RELIST_SECONDS`` since the last LIST."""
        now = time.monotonic()
        if not self._relist and selector == self._listed_selector and now - self._listed_at < RELIST_SECONDS:
            return
        query = ",".join(filter(None, (selector.to_query(), GROUP_LABEL)))
        pods, revision = list_items(self.core.list_namespaced_pod, self.namespace, label_selector=query)
        PODS.relisted(self.namespace, _member_of(selector), map(pod_listed, pods), revision, now)
        leases, revision = list_items(
            self.coordination.list_namespaced_lease,
            self.namespace,
            label_selector=f"{GROUP_LABEL}={self.group}",
        )
        LEASES.relisted(self.namespace, self._ours, map(lease_listed, leases), revision, now)
        self._listed_selector, self._listed_at, self._relist = selector, now, False

    def pods(self, selector: LabelSelector) -> list[PodView]:
        return sorted(PODS.select(self.namespace, _member_of(selector)).values(), key=lambda pod: pod.name)

    def leases(self) -> dict[str, LeaseView]:
        return LEASES.select(self.namespace, self._ours)

    def changes(self) -> tuple[int, int]:
        """Counts that move with every significant change of the namespace's pods and Leases."""
        return PODS.changes(self.namespace), LEASES.changes(self.namespace)

    def _ours(self, labels: dict[str, str]) -> bool:
        return labels.get(GROUP_LABEL) == self.group


def _member_of(selector: LabelSelector) -> Callable[[dict[str, str]], bool]:
    """A pod's labels make it a candidate member: the group's selector and the member label."""
    return lambda labels: GROUP_LABEL in labels and selector.matches(labels)
