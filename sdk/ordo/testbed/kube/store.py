"""Objects, the global resourceVersion counter, a bounded change history and watch fan-out.

Everything runs on the server's event loop, so there is no locking. Stored objects are never
mutated after they are written (writers always store fresh dicts), which lets reads hand them out
without copying and lets one JSON encoding of a change be shared by every watcher.
"""

from __future__ import annotations

import asyncio
import bisect
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .errors import gone

JSON = dict[str, Any]


@dataclass
class Change:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    key: str  # ResourceType.key
    obj: JSON
    old: JSON | None = None
    _wire: dict[tuple[str, str], bytes] = field(default_factory=dict, repr=False)

    def wire(self, type_: str, api_version: str, view: Callable[[JSON], JSON]) -> bytes:
        """The watch line for this change, encoded once per (type, apiVersion): ``view`` (the
        object as that apiVersion shows it) depends on the apiVersion only."""
        cache_key = (type_, api_version)
        line = self._wire.get(cache_key)
        if line is None:
            obj = view(self.obj)
            line = json.dumps({"type": type_, "object": obj}, separators=(",", ":")).encode() + b"\n"
            self._wire[cache_key] = line
        return line


class Subscription:
    """One watch: filters changes of its kind and queues what it should see.

    A change that makes an object start or stop matching the selectors is turned into ADDED or
    DELETED, as the apiserver's watch cache does.
    """

    def __init__(self, key: str, namespace: str | None, match: Callable[[JSON], bool]):
        self.key = key
        self.namespace = namespace
        self.match = match
        self.queue: asyncio.Queue[tuple[str, Change] | None] = asyncio.Queue()

    def translate(self, ch: Change) -> str | None:
        if self.namespace is not None and ch.obj.get("metadata", {}).get("namespace") != self.namespace:
            return None
        now = self.match(ch.obj)
        if ch.type != "MODIFIED":
            return ch.type if now else None
        before = ch.old is not None and self.match(ch.old)
        if now:
            return "MODIFIED" if before else "ADDED"
        return "DELETED" if before else None

    def offer(self, ch: Change) -> None:
        type_ = self.translate(ch)
        if type_ is not None:
            self.queue.put_nowait((type_, ch))

    def close(self) -> None:
        self.queue.put_nowait(None)


class Store:
    def __init__(self, history: int = 10_000):
        self.rv = 0
        self._objects: dict[str, dict[str, dict[str, JSON]]] = {}  # key -> namespace -> name -> obj
        self._history: list[Change] = []
        self._history_limit = history
        self._compacted = 0  # highest rv no longer in the history
        self._subs: dict[str, set[Subscription]] = {}
        # owner uid -> (key, namespace, name) of dependents, for garbage collection without scans
        self._dependents: dict[str, set[tuple[str, str, str]]] = {}
        self.on_change: Callable[[], None] | None = None  # persistence hook

    # --- reads --------------------------------------------------------------------------------

    def get(self, key: str, namespace: str, name: str) -> JSON | None:
        return self._objects.get(key, {}).get(namespace, {}).get(name)

    def items(self, key: str, namespace: str | None = None) -> list[JSON]:
        """Objects of a kind in key order (namespace, name), as etcd lists them."""
        by_ns = self._objects.get(key, {})
        spaces = [namespace] if namespace is not None else sorted(by_ns)
        out: list[JSON] = []
        for ns in spaces:
            objs = by_ns.get(ns, {})
            out.extend(objs[n] for n in sorted(objs))
        return out

    def any_in(self, key: str, namespace: str) -> bool:
        return bool(self._objects.get(key, {}).get(namespace))

    def keys(self) -> list[str]:
        return list(self._objects)

    def dependents(self, owner_uid: str) -> list[tuple[str, str, str]]:
        """(key, namespace, name) of objects with an ownerReference to ``owner_uid``."""
        return sorted(self._dependents.get(owner_uid, ()))

    def _index_owners(self, key: str, old: JSON | None, new: JSON | None) -> None:
        for obj, add in ((old, False), (new, True)):
            if obj is None:
                continue
            meta = obj["metadata"]
            ref = (key, meta.get("namespace", ""), meta["name"])
            for owner in meta.get("ownerReferences") or ():
                uid = owner.get("uid")
                if add:
                    self._dependents.setdefault(uid, set()).add(ref)
                elif uid in self._dependents:
                    self._dependents[uid].discard(ref)
                    if not self._dependents[uid]:
                        del self._dependents[uid]

    # --- writes -------------------------------------------------------------------------------

    def write(self, key: str, type_: str, obj: JSON, old: JSON | None = None) -> JSON:
        """Store (or, for DELETED, remove) ``obj`` under a new resourceVersion and notify watchers."""
        self.rv += 1
        meta = {**obj.get("metadata", {}), "resourceVersion": str(self.rv)}
        obj = {**obj, "metadata": meta}  # shallow copy: the caller's dict (maybe a stored one) stays intact
        spaces = self._objects.setdefault(key, {})
        ns = meta.get("namespace", "")
        previous = spaces.get(ns, {}).get(meta["name"])
        if type_ == "DELETED":
            objs = spaces.get(ns, {})
            objs.pop(meta["name"], None)
            if not objs:
                spaces.pop(ns, None)
            self._index_owners(key, previous, None)
        else:
            spaces.setdefault(ns, {})[meta["name"]] = obj
            self._index_owners(key, previous, obj)
        ch = Change(self.rv, type_, key, obj, old)
        self._history.append(ch)
        if len(self._history) > 2 * self._history_limit:  # trim in batches: amortised O(1)
            self._compacted = self._history[-self._history_limit - 1].rv
            del self._history[: -self._history_limit]
        for sub in self._subs.get(key, ()):
            sub.offer(ch)
        if self.on_change is not None:
            self.on_change()
        return obj

    # --- watching -----------------------------------------------------------------------------

    def since(self, key: str, rv: int) -> Iterator[Change]:
        """Changes of a kind after ``rv``; 410 Gone if some were already dropped from the history."""
        if rv < self._compacted:
            raise gone(rv, self._compacted + 1)
        start = bisect.bisect_right(self._history, rv, key=lambda c: c.rv)
        return (c for c in self._history[start:] if c.key == key)

    def subscribe(self, sub: Subscription) -> None:
        self._subs.setdefault(sub.key, set()).add(sub)

    def unsubscribe(self, sub: Subscription) -> None:
        self._subs.get(sub.key, set()).discard(sub)

    def close_all(self) -> None:
        for subs in self._subs.values():
            for sub in subs:
                sub.close()

    # --- persistence --------------------------------------------------------------------------

    def snapshot(self) -> JSON:
        return {"resourceVersion": self.rv, "objects": {k: self.items(k) for k in self._objects}}

    def restore(self, snap: JSON) -> None:
        self.rv = int(snap["resourceVersion"])
        self._compacted = self.rv  # history is not persisted: older watches must relist
        for key, objs in snap["objects"].items():
            spaces = self._objects.setdefault(key, {})
            for obj in objs:
                meta = obj["metadata"]
                spaces.setdefault(meta.get("namespace", ""), {})[meta["name"]] = obj
                self._index_owners(key, None, obj)
