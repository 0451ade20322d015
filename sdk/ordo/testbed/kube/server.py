"""HTTP routes of the emulator: URL parsing, auth, faults, and the list/watch streaming.

Why a server of our own rather than a kmock subclass: kmock resolves each request by matching it
against every earlier one (requests slow down without bound), and most of the Kubernetes semantics
ordo's tests depend on (resourceVersions, optimistic concurrency, finalizers, /status, selectors,
watch resumption and 410, strategic merge, schema admission) had to be overridden anyway. One
catch-all aiohttp handler over :class:`~.cluster.Cluster` does every request in O(1) or O(objects
of one kind), and watches are fed from per-kind subscriber queues without polling.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from aiohttp import web

from . import discovery, tables
from .cluster import Cluster
from .errors import ApiError, bad_request, no_such_path
from .faults import Faults
from .resources import ResourceType
from .selectors import matcher
from .store import Subscription

JSON = dict[str, Any]
log = logging.getLogger(__name__)

_AGGREGATED = "application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList"
_INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def _json(obj: Any, status: int = 200, content_type: str = "application/json") -> web.Response:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return web.Response(body=body, status=status, headers={"Content-Type": content_type})


def _error(e: ApiError) -> web.Response:
    return _json(e.status(), status=e.code)


class Target:
    """A parsed resource URL."""

    def __init__(self, rt: ResourceType, version: str, ns: str | None, name: str | None, sub: str | None):
        self.rt, self.version, self.ns, self.name, self.sub = rt, version, ns, name, sub


class Server:
    def __init__(
        self,
        cluster: Cluster,
        faults: Faults | None = None,
        token: str | None = None,
        bookmark_interval: float = 20.0,
        max_watch_seconds: float = 1800.0,
    ):
        self.cluster = cluster
        self.faults = faults or Faults()
        self.token = token
        self.bookmark_interval = bookmark_interval
        self.max_watch_seconds = max_watch_seconds
        self.address = "127.0.0.1"
        self.watches = 0  # open watch streams, drained at shutdown so that they end cleanly
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self.handle)

    # --- dispatch -----------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            parts = [p for p in request.path.split("/") if p]
            public = parts in (
                ["healthz"],
                ["readyz"],
                ["livez"],
                ["version"],
            )  # as system:public-info-viewer
            if (
                self.token is not None
                and not public
                and request.headers.get("Authorization") != f"Bearer {self.token}"
            ):
                raise ApiError(401, "Unauthorized")
            if parts and parts[0] == "_testbed":
                return await self._testbed(request, parts[1:])
            if request.method == "GET":
                doc = self._discovery(request, parts)
                if doc is not None:
                    return doc
            target = self._parse(parts)
            verb = self._verb(request, target)
            return await self._serve(request, target, verb)
        except ApiError as e:
            return _error(e)

    def _discovery(self, request: web.Request, parts: list[str]) -> web.StreamResponse | None:
        reg = self.cluster.registry
        if parts in (["healthz"], ["readyz"], ["livez"]):
            return web.Response(text="ok")
        if parts == ["version"]:
            return _json(discovery.VERSION)
        if parts in (["api"], ["apis"]):
            accept = request.headers.get("Accept", "")
            for v in ("v2", "v2beta1"):
                if f"g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList" in accept.replace(" ", ""):
                    doc = discovery.aggregated(reg, parts == ["api"], f"apidiscovery.k8s.io/{v}")
                    return _json(doc, content_type=_AGGREGATED.format(v=v))
            if parts == ["api"]:
                return _json(discovery.api_versions(self.address))
            return _json(discovery.api_groups(reg))
        if len(parts) == 2 and parts[0] == "apis":
            versions = reg.groups().get(parts[1])
            if not versions:
                raise no_such_path()
            return _json(discovery.api_group(parts[1], versions))
        if (len(parts) == 2 and parts[0] == "api") or (len(parts) == 3 and parts[0] == "apis"):
            group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
            resources = discovery.resource_list(reg, group, version)
            if resources is None:
                raise no_such_path()
            return _json(resources)
        return None

    def _parse(self, parts: list[str]) -> Target:
        if len(parts) >= 2 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise no_such_path()
        if rest and rest[0] == "watch":  # legacy /watch/ paths
            rest = rest[1:]
        ns: str | None = None
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and not (not group and len(rest) == 3 and rest[2] == "status")
        ):
            ns, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise no_such_path()
        rt = self.cluster.resolve(group, version, rest[0])
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if (ns is not None and not rt.namespaced) or (
            sub is not None and not (sub == "status" and rt.status_subresource)
        ):
            raise no_such_path()
        if rt.namespaced and ns is None and name is not None:
            raise no_such_path()
        return Target(rt, version, ns, name, sub)

    @staticmethod
    def _verb(request: web.Request, t: Target) -> str:
        m = request.method
        if m == "GET":
            if t.name is not None:
                return "get"
            watch = request.query.get("watch", "") in ("true", "1") or "/watch/" in request.path
            return "watch" if watch else "list"
        if m == "POST" and t.name is None:
            return "create"
        if m == "PUT" and t.name is not None:
            return "update"
        if m == "PATCH" and t.name is not None:
            return "patch"
        if m == "DELETE":
            return "delete" if t.name is not None else "deletecollection"
        raise ApiError(405, f"the server does not allow this method on the requested resource ({m})")

    async def _serve(self, request: web.Request, t: Target, verb: str) -> web.StreamResponse:
        fault = self.faults.take(verb, t.rt.plural + (f"/{t.sub}" if t.sub else ""), t.ns, t.name)
        if fault is not None:
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.code:
                return _error(ApiError(fault.code, fault.message))
        c, rt, v, ns = self.cluster, t.rt, t.version, t.ns or ""
        q = request.query
        if verb == "watch":
            return await self._watch(request, t)
        as_table = "as=Table" in request.headers.get("Accept", "")
        if verb == "list":
            labels, fields = q.get("labelSelector"), q.get("fieldSelector")
            if as_table:
                items = c.list(rt, t.ns, matcher(labels, fields, self._fields(rt)))
                return _json(tables.table(rt, v, items, str(c.store.rv)))
            return self._list(t, labels, fields, q.get("limit"), q.get("continue"))
        if verb == "get":
            assert t.name is not None
            obj = c.get(rt, ns, t.name)
            if as_table:
                return _json(tables.table(rt, v, [obj], obj["metadata"]["resourceVersion"]))
            return _json(c.view(rt, v, obj))
        if verb == "create":
            if rt.namespaced and t.ns is None:
                raise no_such_path()
            created = c.create(rt, v, ns, await self._body(request), dry_run="dryRun" in q)
            return _json(c.view(rt, v, created), status=201)
        assert t.name is not None or verb == "deletecollection"
        if verb == "update":
            assert t.name is not None
            return _json(c.view(rt, v, c.replace(rt, v, ns, t.name, await self._body(request), t.sub)))
        if verb == "patch":
            assert t.name is not None
            patched = c.patch(rt, v, ns, t.name, request.content_type, await request.read(), t.sub)
            return _json(c.view(rt, v, patched))
        options = await self._body(request) if request.can_read_body else {}
        if "gracePeriodSeconds" in q:
            options["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
        if verb == "deletecollection":
            match = matcher(q.get("labelSelector"), q.get("fieldSelector"), self._fields(rt))
            for obj in c.list(rt, t.ns, match):
                c.delete(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], options)
            return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
        assert t.name is not None
        result = c.delete(rt, ns, t.name, options)
        if rt.custom or rt.plural == "pods" or result["metadata"].get("deletionTimestamp"):
            return _json(c.view(rt, v, result))
        details = {"name": t.name, "kind": rt.plural, "uid": result["metadata"]["uid"]}
        if rt.group:
            details["group"] = rt.group
        return _json(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
        )

    @staticmethod
    async def _body(request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError as e:
            raise bad_request(f"the body of the request cannot be decoded as JSON: {e}") from e

    @staticmethod
    def _fields(rt: ResourceType) -> dict[str, str]:
        base = {"metadata.name": "metadata.name"}
        if rt.namespaced:
            base["metadata.namespace"] = "metadata.namespace"
        return base | rt.selectable

    # --- list ---------------------------------------------------------------------------------

    def _list(
        self, t: Target, labels: str | None, fields: str | None, limit: str | None, token: str | None
    ) -> web.Response:
        rt, c = t.rt, self.cluster
        items = c.list(rt, t.ns, matcher(labels, fields, self._fields(rt)))
        meta: JSON = {"resourceVersion": str(c.store.rv)}
        if token:
            try:
                after = tuple(json.loads(base64.urlsafe_b64decode(token))["after"])
            except (ValueError, KeyError, TypeError) as e:
                raise bad_request(f"continue key is not valid: {e}") from e
            items = [o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > after]
        if limit and int(limit) > 0 and len(items) > int(limit):
            items, rest = items[: int(limit)], len(items) - int(limit)
            last = items[-1]["metadata"]
            key = [last.get("namespace", ""), last["name"]]
            meta["continue"] = base64.urlsafe_b64encode(json.dumps({"after": key}).encode()).decode()
            meta["remainingItemCount"] = rest
        views = [c.view(rt, t.version, o) for o in items]
        return _json(
            {
                "kind": f"{rt.kind}List",
                "apiVersion": rt.api_version(t.version),
                "metadata": meta,
                "items": views,
            }
        )

    # --- watch --------------------------------------------------------------------------------

    async def _watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        rt, store = t.rt, self.cluster.store
        api_version = rt.api_version(t.version)
        sub = Subscription(rt.key, t.ns if rt.namespaced else None, matcher(
            q.get("labelSelector"), q.get("fieldSelector"), self._fields(rt)))  # fmt: skip
        timeout = min(float(q.get("timeoutSeconds") or self.max_watch_seconds), self.max_watch_seconds)
        deadline = time.monotonic() + timeout
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        rv = q.get("resourceVersion") or "0"
        initial = q.get("sendInitialEvents") in ("true", "1")

        def view(obj: JSON) -> JSON:
            return self.cluster.view(rt, t.version, obj)

        def bookmark(annotations: dict[str, str] | None = None) -> bytes:
            meta: JSON = {"resourceVersion": str(store.rv)}
            if annotations:
                meta["annotations"] = annotations
            obj = {"kind": rt.kind, "apiVersion": api_version, "metadata": meta}
            return json.dumps({"type": "BOOKMARK", "object": obj}, separators=(",", ":")).encode() + b"\n"

        # Subscribing and reading the starting state happen with no await in between: no gaps.
        store.subscribe(sub)
        self.watches += 1
        try:
            lines: list[bytes] = []
            if rv == "0" or initial:
                for obj in self.cluster.list(rt, t.ns, sub.match):
                    added = {"type": "ADDED", "object": view(obj)}
                    lines.append(json.dumps(added, separators=(",", ":")).encode() + b"\n")
                if initial and bookmarks:
                    lines.append(bookmark({_INITIAL_EVENTS_END: "true"}))
            else:
                try:
                    since = int(rv)
                except ValueError as e:
                    raise bad_request(f"invalid resource version: {rv!r}") from e
                try:
                    for ch in store.since(rt.key, since):
                        type_ = sub.translate(ch)
                        if type_ is not None:
                            lines.append(ch.wire(type_, api_version, view))
                except ApiError as e:  # 410 Gone arrives as an ERROR event in a 200 stream
                    lines.append(json.dumps({"type": "ERROR", "object": e.status()}).encode() + b"\n")
                    deadline = 0.0
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            if lines:
                await resp.write(b"".join(lines))
            await self._pump(resp, sub, api_version, view, deadline, bookmark if bookmarks else None)
            return resp
        finally:
            store.unsubscribe(sub)
            self.watches -= 1

    async def close_watches(self, timeout: float = 2.0) -> None:
        """End every watch stream properly (a final chunk, not a dropped connection)."""
        self.cluster.store.close_all()
        deadline = time.monotonic() + timeout
        while self.watches > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    async def _pump(
        self,
        resp: web.StreamResponse,
        sub: Subscription,
        api_version: str,
        view: Callable[[JSON], JSON],
        deadline: float,
        bookmark: Any,
    ) -> None:
        next_bookmark = time.monotonic() + self.bookmark_interval
        try:
            while (left := deadline - time.monotonic()) > 0:
                wait = min(left, next_bookmark - time.monotonic()) if bookmark else left
                try:
                    async with asyncio.timeout(max(wait, 0)):
                        item = await sub.queue.get()
                except TimeoutError:
                    if bookmark and time.monotonic() >= next_bookmark:
                        await resp.write(bookmark())
                        next_bookmark = time.monotonic() + self.bookmark_interval
                    continue
                if item is None:
                    return  # server stopping
                chunk = [item[1].wire(item[0], api_version, view)]
                while not sub.queue.empty():  # batch what is already queued into one write
                    more = sub.queue.get_nowait()
                    if more is None:
                        await resp.write(b"".join(chunk))
                        return
                    chunk.append(more[1].wire(more[0], api_version, view))
                await resp.write(b"".join(chunk))
            if bookmark:
                await resp.write(bookmark())
        except (ConnectionResetError, ConnectionError):
            return

    # --- testbed control ----------------------------------------------------------------------

    async def _testbed(self, request: web.Request, parts: list[str]) -> web.Response:
        if parts != ["faults"]:
            raise no_such_path()
        if request.method == "GET":
            return _json(self.faults.list())
        if request.method == "DELETE":
            self.faults.clear()
            return _json({"cleared": True})
        if request.method == "POST":
            spec = await self._body(request)
            if not isinstance(spec, dict):
                raise bad_request("a fault is a JSON object")
            try:
                return _json(asdict(self.faults.add(**spec)), status=201)
            except TypeError as e:
                raise bad_request(str(e)) from e
        raise ApiError(405, "use GET, POST or DELETE")
