"""The Kafka-protocol proxy: per-connection pipelining, dispatch to handlers, fault injection."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from . import wire
from .coordinator import Coordinator
from .core import Config, ProxyCore
from .entities import blank, element_type
from .faults import Fault, FaultSet
from .handlers import SHAPES, Action, Drop, Forced, Forward, Later, Reply, Request, ResponseHook, targets
from .state import TopicRegistry
from .versions import HANDLERS

log = logging.getLogger(__name__)

_HIGH_WATER = 1 << 20


class KafkaProxy:
    """Listens on ``host:port`` (0: any free port) and forwards to the broker at ``upstream``."""

    def __init__(
        self,
        upstream: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_partitions: int = 64,
        default_partitions: int = 1,
        auto_create_topics: bool = True,
        state_dir: Path | None = None,
        faults: FaultSet | None = None,
        group_min_session_timeout_ms: int = 1000,
        group_initial_rebalance_delay_ms: int = 250,
    ) -> None:
        up_host, _, up_port = upstream.rpartition(":")
        self.config = Config(up_host, int(up_port), max_partitions, default_partitions, auto_create_topics)
        self.faults = faults if faults is not None else FaultSet()
        self.registry = TopicRegistry(max_partitions, state_dir)
        self._state_dir = state_dir
        self._group_options = {
            "min_session_timeout_ms": group_min_session_timeout_ms,
            "initial_rebalance_delay_ms": group_initial_rebalance_delay_ms,
        }
        self._host = host
        self._port = port
        self._core: ProxyCore | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()

    @property
    def port(self) -> int:
        return self._port

    @property
    def bootstrap(self) -> str:
        return f"{self._host}:{self._port}"

    async def start(self) -> None:
        coordinator = Coordinator(self._state_dir, **self._group_options)
        self._core = ProxyCore(self.config, self.registry, self.faults, coordinator)
        await self._core.reconcile()
        coordinator.start()
        self._server = await asyncio.start_server(self._accept, self._host, self._port, reuse_address=True)
        self._port = self._server.sockets[0].getsockname()[1]
        self._core.advertised = (self._host, self._port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.close()
        while self._connections:
            await asyncio.sleep(0.001)  # each connection removes itself once closed
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        if self._core is not None:
            await self._core.coordinator.stop()
            await self._core.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._core is not None
        try:
            upstream = await asyncio.open_connection(self.config.upstream_host, self.config.upstream_port)
        except OSError:
            writer.close()
            return
        peer = writer.get_extra_info("peername")
        connection = _Connection(self._core, reader, writer, *upstream, peer=peer[0] if peer else "")
        self._connections.add(connection)
        try:
            await connection.run()
        finally:
            self._connections.discard(connection)


class _DropConnection(Exception):
    pass


class _Connection:
    """Requests are handled one at a time in arrival order (as a Kafka broker does per connection)
    and forwarded at once; responses are written back in request order."""

    def __init__(
        self,
        core: ProxyCore,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
        *,
        peer: str = "",
    ) -> None:
        self.core = core
        self.peer = f"/{peer}"  # Kafka reports client hosts as "/<address>"
        self.reader, self.writer = reader, writer
        self.up_reader, self.up_writer = up_reader, up_writer
        self.pending: dict[int, asyncio.Future[bytes]] = {}
        self.order: asyncio.Queue[tuple[asyncio.Future[bytes], ResponseHook | None]] = asyncio.Queue()
        self.tasks: list[asyncio.Task[None]] = []

    def close(self) -> None:
        for task in self.tasks:
            task.cancel()

    async def run(self) -> None:
        tasks = self.tasks = [
            asyncio.create_task(self._requests()),
            asyncio.create_task(self._upstream()),
            asyncio.create_task(self._responses()),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self.writer.close()
            self.up_writer.close()

    async def _requests(self) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, _DropConnection):
            while True:
                body = await wire.read_frame(self.reader)
                prefix = wire.peek_request(body)
                action = await self._dispatch(Request(prefix, body, self.peer))
                if isinstance(action, Drop):
                    raise _DropConnection
                if isinstance(action, Later):
                    self.order.put_nowait((action.response, None))
                    continue
                future: asyncio.Future[bytes] = loop.create_future()
                if isinstance(action, Reply):
                    if action.body is None:
                        continue
                    future.set_result(action.body)
                    self.order.put_nowait((future, None))
                    continue
                if action.expect_response:
                    self.pending[prefix.correlation_id] = future
                    self.order.put_nowait((future, action.hook))
                self.up_writer.write(wire.frame(action.body))
                if self.up_writer.transport.get_write_buffer_size() > _HIGH_WATER:
                    await self.up_writer.drain()

    async def _upstream(self) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                body = await wire.read_frame(self.up_reader)
                future = self.pending.pop(wire.peek_correlation(body), None)
                if future is not None and not future.done():
                    future.set_result(body)

    async def _responses(self) -> None:
        while True:
            future, hook = await self.order.get()
            raw = await future
            if hook is not None:
                try:
                    raw = await hook(raw)
                except Exception:
                    log.exception("kafka proxy: response rewrite failed; dropping the connection")
                    return
            self.writer.write(wire.frame(raw))
            if self.writer.transport.get_write_buffer_size() > _HIGH_WATER:
                await self.writer.drain()

    async def _dispatch(self, request: Request) -> Action:
        api_key = request.prefix.api_key
        forced: Forced = {}
        hits: list[tuple[Fault, set[tuple[str, int]]]] = []
        if self.core.faults.watches(api_key):
            try:
                named = targets(request)
            except Exception:
                named = []
            hits = self.core.faults.take(api_key, named)
            delay = sum((f.delay or 0.0) for f, _ in hits)
            if delay > 0:
                await asyncio.sleep(delay)
            if any(f.drop for f, _ in hits):
                return Drop()
            for fault, matched in hits:
                error = fault.error_code
                if error is None:
                    continue
                if api_key not in SHAPES and api_key != 3:
                    return request.reply(error_response(request, error, named))
                if fault.topic is None:
                    forced.update(dict.fromkeys(named, error))
                elif api_key == 3 and fault.partition is not None:
                    forced[(fault.topic, fault.partition)] = error  # Metadata: that partition's error
                elif matched:
                    forced.update(dict.fromkeys(matched, error))
                else:
                    forced[(fault.topic, None)] = error
        handler = HANDLERS.get(api_key)
        action = Forward(request.body) if handler is None else await handler(self.core, request, forced)
        late = sum((f.late or 0.0) for f, _ in hits)
        return _answered_late(action, late) if late > 0 else action


def _answered_late(action: Action, seconds: float) -> Action:
    """The request has taken effect (answered locally, or forwarded now); its answer is held back."""

    async def hold(raw: bytes) -> bytes:
        await asyncio.sleep(seconds)
        return raw

    if isinstance(action, Forward):
        inner = action.hook

        async def held(raw: bytes) -> bytes:
            return await hold(await inner(raw) if inner is not None else raw)

        return dataclasses.replace(action, hook=held)
    if isinstance(action, Reply) and action.body is not None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()
        body = action.body

        def release() -> None:
            if not future.done():  # the connection may have closed meanwhile
                future.set_result(body)

        loop.call_later(seconds, release)
        return Later(future)
    return action


def error_response(request: Request, error: ErrorCode, named: list[tuple[str, int | None]]) -> Any:
    """A locally built response carrying ``error`` where this API reports errors."""
    schema = request.response_schema()
    fields = {f.name for f in dataclasses.fields(schema)}
    if "error_code" in fields:
        return blank(schema, error_code=error)
    if "coordinators" in fields:  # FindCoordinator v4+
        entry = element_type(schema, "coordinators")
        keys = request.payload.coordinator_keys
        return blank(
            schema,
            coordinators=tuple(blank(entry, key=k, node_id=-1, port=-1, error_code=error) for k in keys),
        )
    for name in ("topics", "results", "responses"):
        if name in fields:
            entry = element_type(schema, name)
            topics = dict.fromkeys(t for t, _ in named)
            return blank(schema, **{name: tuple(blank(entry, name=t, error_code=error) for t in topics)})
    raise ValueError(f"cannot build an error response for api {request.prefix.api_key}")
