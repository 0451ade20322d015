"""Fault control over HTTP on 127.0.0.1, for a proxy running in another process.

POST   /faults        JSON Fault fields -> {"id": N}
GET    /faults        -> [fault, ...]
DELETE /faults        clear all
DELETE /faults/{id}   remove one
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from aiohttp import web

from ordo_testbed.kafka.faults import Fault, FaultSet


def control_app(faults: FaultSet) -> web.Application:
    async def add(request: web.Request) -> web.Response:
        try:
            fault = faults.add(Fault.from_json(await request.json()))
        except (ValueError, KeyError, TypeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"id": fault.id})

    async def listing(request: web.Request) -> web.Response:
        return web.json_response([f.to_json() for f in faults.snapshot()])

    async def clear(request: web.Request) -> web.Response:
        faults.clear()
        return web.json_response({})

    async def remove(request: web.Request) -> web.Response:
        faults.remove(int(request.match_info["fault_id"]))
        return web.json_response({})

    app = web.Application()
    app.add_routes(
        [
            web.post("/faults", add),
            web.get("/faults", listing),
            web.delete("/faults", clear),
            web.delete("/faults/{fault_id}", remove),
        ]
    )
    return app


async def start_control(faults: FaultSet, host: str, port: int) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(control_app(faults), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    sockets = getattr(site._server, "sockets", None) or ()
    bound: int = sockets[0].getsockname()[1] if sockets else port
    return runner, bound


class RemoteFaults:
    """Same surface as FaultSet (add/remove/clear/snapshot) for a proxy in another process."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"null")

    def add(self, fault: Fault) -> Fault:
        body = fault.to_json()
        for key in ("id", "hits"):
            body.pop(key, None)
        fault.id = int(self._call("POST", "/faults", body)["id"])
        return fault

    def remove(self, fault_id: int) -> None:
        self._call("DELETE", f"/faults/{fault_id}")

    def clear(self) -> None:
        self._call("DELETE", "/faults")

    def snapshot(self) -> list[Fault]:
        result = []
        for data in self._call("GET", "/faults"):
            fault = Fault.from_json(data)
            fault.id, fault.hits = int(data["id"]), int(data["hits"])
            result.append(fault)
        return result
