"""A thin fault proxy in front of the testbed's API server, for reliability tests: the next N
matching requests answer with an error, answer late, or (a watch) end at once.

    with FaultProxy(server) as proxy:                    # its own port, the server's CA
        operator = OperatorProcess(proxy.kubeconfig_path, ...)
        fault = proxy.faults.add(verb="patch", resource="pods", namespace=ns, code=500, count=2)

Only the clients given ``proxy.kubeconfig_path`` meet the faults. A request carrying a bearer
token goes on with it; any other goes on with the admin's client certificate.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import threading
from dataclasses import dataclass, fields
from types import TracebackType
from typing import Any

import yaml
from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

from ordo_testbed.kube.apiserver import KubeApiServer, kubeconfig

__all__ = ["Fault", "FaultProxy", "Faults"]

# /api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUB]] and /apis/GROUP/VERSION[/namespaces/NS]/...
_PATH = re.compile(
    r"^/(?:api/[^/]+|apis/[^/]+/[^/]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/]+)"
    r"(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"}


@dataclass
class Fault:
    verb: str | None = None  # get list watch create update patch delete deletecollection; None = any
    resource: str | None = None  # "pods", "pods/status", "producergroups"; None = any
    namespace: str | None = None
    name: str | None = None
    code: int = 500  # 0 = no error, only the delay (or the cut)
    delay: float = 0.0  # seconds before answering
    drop: bool = False  # a watch: ends at once with no event, as when its connection is lost
    count: int = 1  # requests to hit; -1 = until cleared
    message: str = "injected fault"
    hits: int = 0

    def matches(self, verb: str, resource: str, namespace: str | None, name: str | None) -> bool:
        wanted = (self.verb, self.resource, self.namespace, self.name)
        return all(
            w is None or w == got for w, got in zip(wanted, (verb, resource, namespace, name), strict=True)
        )


class Faults:
    """Thread-safe: tests add faults from their thread, the proxy's loop takes them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, **spec: Any) -> Fault:
        """Add a fault; keyword arguments are :class:`Fault`'s fields."""
        fault = Fault(**{k: v for k, v in spec.items() if k in {f.name for f in fields(Fault)}})
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def take(self, verb: str, resource: str, namespace: str | None, name: str | None) -> Fault | None:
        """The first matching fault, counted as hit (and dropped once its count is used up)."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(verb, resource, namespace, name):
                    fault.hits += 1
                    if fault.count >= 0 and fault.hits >= fault.count:
                        self._faults.remove(fault)
                    return fault
        return None


def classify(method: str, path: str, watch: bool) -> tuple[str, str, str | None, str | None] | None:
    """(verb, resource[/sub], namespace, name) of a resource request; None for anything else."""
    found = _PATH.match(path)
    if found is None:
        return None
    ns, resource, name, sub = found.group("ns", "resource", "name", "sub")
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch"}
    if method == "GET":
        verb = "watch" if watch else ("get" if name else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = verbs.get(method, method.lower())
    return verb, resource + (f"/{sub}" if sub else ""), ns, name


class FaultProxy:
    """Serves on 127.0.0.1 from a thread of its own until :meth:`stop` (also a context manager)."""

    def __init__(self, server: KubeApiServer) -> None:
        self.server = server
        self.faults = Faults()
        self.port = 0
        self.kubeconfig_path = server.folder / f"kubeconfig-proxy-{id(self):x}"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._sessions: dict[bool, ClientSession] = {}

    def start(self) -> FaultProxy:
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            try:
                asyncio.run(self._serve(ready))
            except BaseException as error:
                failure.append(error)
                ready.set()

        self._thread = threading.Thread(target=main, name="kube-fault-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(30) or failure:
            raise RuntimeError("the API fault proxy did not start") from (failure[0] if failure else None)
        config = kubeconfig(f"https://127.0.0.1:{self.port}", self.server.pki)
        self.kubeconfig_path.write_text(yaml.safe_dump(config))
        return self

    async def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        pki = self.server.pki
        serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.path("ca.crt")))
        serving.load_cert_chain(str(pki.path("server.crt")), str(pki.path("server.key")))
        serving.verify_mode = ssl.CERT_OPTIONAL
        for with_cert in (True, False):  # the admin's certificate, or the request's own token
            upstream = ssl.create_default_context(cafile=str(pki.path("ca.crt")))
            if with_cert:
                upstream.load_cert_chain(str(pki.path("admin.crt")), str(pki.path("admin.key")))
            self._sessions[with_cert] = ClientSession(
                connector=TCPConnector(ssl=upstream), timeout=ClientTimeout(total=None), auto_decompress=False
            )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=serving)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        ready.set()
        try:
            await self._stopping.wait()
        finally:
            await runner.cleanup()
            for session in self._sessions.values():
                await session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        kind = classify(request.method, request.path, request.query.get("watch") in ("true", "1"))
        fault = self.faults.take(*kind) if kind is not None else None
        if fault is not None:
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.code:
                return web.json_response(_status(fault.code, fault.message), status=fault.code)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        session = self._sessions["authorization" not in {k.lower() for k in headers}]
        url = f"{self.server.url}{request.path_qs}"
        body = await request.read()
        sent = session.request(  # no Content-Type of aiohttp's own: the API server reads none as JSON
            request.method, url, headers=headers, data=body or None, skip_auto_headers=["Content-Type"]
        )
        async with sent as answer:
            response = web.StreamResponse(status=answer.status, headers={
                k: v for k, v in answer.headers.items() if k.lower() not in _HOP
            })  # fmt: skip
            await response.prepare(request)
            if fault is None or not fault.drop:
                async for chunk in answer.content.iter_any():
                    await response.write(chunk)
            await response.write_eof()
            return response

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None
        self.kubeconfig_path.unlink(missing_ok=True)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


def _status(code: int, message: str) -> dict[str, Any]:
    reasons = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reasons.get(code, "InternalError"), "code": code}  # fmt: skip
