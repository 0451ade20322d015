"""The latest view of each object of one kind (pods, Leases), fed by list+watch, pure.

A ProducerGroup's pass reads its pods and Leases from here instead of listing them from
kube-apiserver every second (1,000 members: a third of a core spent listing and parsing objects
that had not changed). Events and LISTs may arrive out of order (a LIST started before a delete
returns after the DELETED event), so every object carries its resourceVersion and an older one
never replaces a newer one; a deleted object leaves a tombstone for a while so that such a LIST
cannot bring it back. kube-apiserver's resourceVersions are etcd revisions, integers that grow
with every write (Kubernetes 1.33 compares them the same way); one that is not an integer cannot
be ordered and is taken as it comes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Listed", "WatchCache", "revision_of"]

V = TypeVar("V")
TOMBSTONE_SECONDS = 600.0
"""How long a deletion blocks older copies: far longer than any LIST takes."""


def revision_of(resource_version: str | None) -> int | None:
    """A resourceVersion as an orderable revision, or None if it is not an integer."""
    return int(resource_version) if resource_version is not None and resource_version.isdigit() else None


def _older(revision: int | None, than: int | None) -> bool:
    return revision is not None and than is not None and revision < than


@dataclass(frozen=True)
class Listed(Generic[V]):
    """One object as a LIST or a watch event showed it."""

    name: str
    labels: dict[str, str]
    revision: int | None
    view: V


class WatchCache(Generic[V]):
    """Views by namespace and name, with a per-namespace count of significant changes.

    ``significant`` picks what of a view matters to wake someone: for a Lease its holder and
    acknowledgement, not ``renewTime`` (1,000 members renewing every 10 s would otherwise wake
    their group's pass 100 times a second). A change of labels is always significant."""

    def __init__(
        self,
        significant: Callable[[V], Hashable] = lambda view: view,
        tombstone_seconds: float = TOMBSTONE_SECONDS,
    ) -> None:
        self._significant = significant
        self._tombstone_seconds = tombstone_seconds
        self._lock = threading.Lock()
        self._objects: dict[str, dict[str, Listed[V]]] = {}
        self._tombstones: dict[tuple[str, str], tuple[int | None, float]] = {}  # -> (revision, when)
        self._changes: dict[str, int] = {}
        self._pruned_at = 0.0

    def put(self, namespace: str, item: Listed[V], now: float) -> bool:
        """Take ``item`` unless what we hold is newer; whether that changed anything significant."""
        with self._lock:
            return self._put(namespace, item, now)

    def delete(self, namespace: str, name: str, revision: int | None, now: float) -> bool:
        """Forget an object (a DELETED event); whether we held it."""
        with self._lock:
            objects = self._objects.get(namespace, {})
            held = objects.get(name)
            if held is not None and _older(revision, held.revision):
                return False  # deleted, then created again: we already hold the new one
            self._tombstones[(namespace, name)] = (revision, now)
            self._prune(now)
            if held is None:
                return False
            del objects[name]
            self._bump(namespace)
            return True

    def relisted(
        self,
        namespace: str,
        selects: Callable[[dict[str, str]], bool],
        items: Iterable[Listed[V]],
        list_revision: int | None,
        now: float,
    ) -> None:
        """Merge a LIST of the objects of ``namespace`` that ``selects`` matches (at revision
        ``list_revision``): whatever it lacks is gone or no longer selected, unless we hold a
        copy newer than the LIST."""
        with self._lock:
            listed = set()
            for item in items:
                listed.add(item.name)
                self._put(namespace, item, now)
            objects = self._objects.get(namespace, {})
            missing = [
                name
                for name, held in objects.items()
                if name not in listed and selects(held.labels) and not _older(list_revision, held.revision)
            ]
            for name in missing:
                del objects[name]
            if missing:
                self._bump(namespace)
            self._prune(now)

    def select(self, namespace: str, selects: Callable[[dict[str, str]], bool]) -> dict[str, V]:
        """The views of the objects of ``namespace`` whose labels ``selects`` matches, by name."""
        with self._lock:
            objects = list(self._objects.get(namespace, {}).values())
        return {item.name: item.view for item in objects if selects(item.labels)}

    def changes(self, namespace: str) -> int:
        """Grows with every significant change in ``namespace``: equal counts, nothing changed."""
        with self._lock:
            return self._changes.get(namespace, 0)

    def _put(self, namespace: str, item: Listed[V], now: float) -> bool:
        tombstone = self._tombstones.get((namespace, item.name))
        if tombstone is not None:
            if item.revision is None or tombstone[0] is None or item.revision > tombstone[0]:
                del self._tombstones[(namespace, item.name)]  # created again after its deletion
            else:
                return False  # a copy from before its deletion
        objects = self._objects.setdefault(namespace, {})
        held = objects.get(item.name)
        if held is not None and _older(item.revision, held.revision):
            return False
        objects[item.name] = item
        changed = (
            held is None
            or held.labels != item.labels
            or self._significant(held.view) != self._significant(item.view)
        )
        if changed:
            self._bump(namespace)
        return changed

    def _prune(self, now: float) -> None:
        """Drop expired tombstones, at most ten times per tombstone's life (a namespace with pods
        coming and going and no group to LIST them must not grow them forever)."""
        if now - self._pruned_at < self._tombstone_seconds / 10:
            return
        self._pruned_at = now
        self._tombstones = {
            key: (revision, when)
            for key, (revision, when) in self._tombstones.items()
            if now - when < self._tombstone_seconds
        }

    def _bump(self, namespace: str) -> None:
        self._changes[namespace] = self._changes.get(namespace, 0) + 1
