"""The fault proxy: a pass-through in front of the real broker that delays, drops or answers
with an error the requests a :class:`~.faults.Fault` names, and forwards everything else as it
came. Kafka's behaviour is Kafka's: nothing here answers for the broker except an injected error.

The broker advertises the proxy's address on the listener behind it, so clients that bootstrap
through the proxy stay on it (no address rewriting). Requests of an API no fault watches are
forwarded as raw bytes without being decoded.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest

from ordo_testbed.kafka import entities, wire
from ordo_testbed.kafka.client import UpstreamClient
from ordo_testbed.kafka.entities import SHAPES, Names, Rejected, blank, element_type, field_names
from ordo_testbed.kafka.faults import Fault, FaultSet

log = logging.getLogger(__name__)

_HIGH_WATER = 1 << 20
_METADATA = 3
Upstream = Callable[[], tuple[str, int]]
ResponseHook = Callable[[bytes], Awaitable[bytes]]
Forced = dict[tuple[str, int | None], ErrorCode]


class FaultProxy:
    """Listens on ``host:port`` (0: any free port) and forwards to ``upstream()`` (host, port),
    asked for each new connection, so the proxy can be bound before the broker has its port."""

    def __init__(
        self, upstream: Upstream, *, host: str = "127.0.0.1", port: int = 0, faults: FaultSet | None = None
    ) -> None:
        self.upstream = upstream
        self.faults = faults if faults is not None else FaultSet()
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._names = _TopicNames(upstream)

    @property
    def port(self) -> int:
        return self._port

    @property
    def bootstrap(self) -> str:
        return f"{self._host}:{self._port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self._host, self._port, reuse_address=True)
        self._port = self._server.sockets[0].getsockname()[1]

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
        await self._names.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream = await asyncio.open_connection(*self.upstream())
        except OSError:
            writer.close()
            return
        connection = _Connection(self, reader, writer, *upstream)
        self._connections.add(connection)
        try:
            await connection.run()
        finally:
            self._connections.discard(connection)


class _TopicNames:
    """Topic id -> name, asked of the broker when a request names topics by id (Fetch v13+,
    Produce v13+) and a fault has to match it by name."""

    def __init__(self, upstream: Upstream) -> None:
        self._upstream = upstream
        self._client: UpstreamClient | None = None
        self._names: Names = {}

    async def resolve(self, ids: set[uuid.UUID]) -> Names:
        if ids - self._names.keys():
            if self._client is None:
                self._client = UpstreamClient(*self._upstream())
            response = await self._client.request(
                MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                include_topic_authorized_operations=False)
            )  # fmt: skip
            self._names.update({t.topic_id: t.name for t in response.topics if t.name})
        return self._names

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()


@dataclass
class _Request:
    prefix: wire.RequestPrefix
    body: bytes
    _decoded: tuple[Any, Any] | None = field(default=None, repr=False)

    @property
    def header(self) -> Any:
        return self._decode()[0]

    @property
    def payload(self) -> Any:
        return self._decode()[1]

    def _decode(self) -> tuple[Any, Any]:
        if self._decoded is None:
            self._decoded = wire.decode_request(self.body)
        return self._decoded

    def reencode(self, payload: Any) -> bytes:
        return wire.encode_request_with(self.header, payload)

    def response_schema(self) -> type[Any]:
        schema = wire.response_schema(self.prefix.api_key, self.prefix.api_version)
        assert schema is not None
        return schema

    def decode_response(self, raw: bytes) -> Any:
        return wire.decode_response(self.prefix.api_key, self.prefix.api_version, raw)

    def encode_response(self, payload: Any) -> bytes:
        return wire.encode_response(payload, self.prefix.correlation_id)


@dataclass
class _Forward:
    body: bytes
    hook: ResponseHook | None = None
    expect_response: bool = True


@dataclass
class _Reply:
    body: bytes | None  # None: the client expects no response (Produce with acks=0)


@dataclass
class _Drop:
    pass


_Action = _Forward | _Reply | _Drop


class _DropConnection(Exception):
    pass


class _Connection:
    """Requests are read in arrival order (a fault's delay holds the ones behind it, as a slow
    broker would) and forwarded at once; responses go back in request order."""

    def __init__(
        self,
        proxy: FaultProxy,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        self.proxy = proxy
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
                if self.proxy.faults.watches(prefix.api_key):
                    action = await self._faulted(_Request(prefix, body))
                else:
                    action = _Forward(body, None, wire.expects_response(prefix, body))
                if isinstance(action, _Drop):
                    raise _DropConnection
                future: asyncio.Future[bytes] = loop.create_future()
                if isinstance(action, _Reply):
                    if action.body is not None:
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
                    log.exception(
                        "fault proxy: answering with the injected error failed; dropping the connection"
                    )
                    return
            self.writer.write(wire.frame(raw))
            if self.writer.transport.get_write_buffer_size() > _HIGH_WATER:
                await self.writer.drain()

    async def _faulted(self, request: _Request) -> _Action:
        api_key = request.prefix.api_key
        names: Names = {}
        try:
            shape = SHAPES.get(api_key)
            if shape is not None:
                names = await self.proxy._names.resolve(entities.topic_ids(request.payload, shape))
                named = entities.pairs(request.payload, shape, names)
            else:
                named = _topics_named(request.payload)
        except Exception:
            named = []  # not decodable by kio: only faults without a topic match it
        hits = self.proxy.faults.take(api_key, named)
        delay = sum((f.delay or 0.0) for f, _ in hits)
        if delay > 0:
            await asyncio.sleep(delay)
        if any(f.drop for f, _ in hits):
            return _Drop()
        forced = _forced(hits, named, api_key)
        if forced is None:  # an error for the whole request
            error = next(f.error_code for f, _ in hits if f.error_code is not None)
            action: _Action = _Reply(request.encode_response(error_response(request, error)))
        elif not forced:
            action = _Forward(request.body, None, wire.expects_response(request.prefix, request.body))
        elif api_key == _METADATA:
            action = _Forward(request.body, _metadata_errors(request, forced))
        else:
            action = _partition_errors(request, forced, names)
        late = sum((f.late or 0.0) for f, _ in hits)
        return _answered_late(action, late) if late > 0 else action


def _topics_named(payload: Any) -> list[tuple[str, int | None]]:
    topics = getattr(payload, "topics", None) or ()
    return [(t.name, None) for t in topics if isinstance(getattr(t, "name", None), str)]


def _forced(
    hits: list[tuple[Fault, set[tuple[str, int]]]], named: list[tuple[str, int | None]], api_key: int
) -> Forced | None:
    """Which topics/partitions answer which error; None: the whole request answers an error."""
    forced: Forced = {}
    for fault, matched in hits:
        error = fault.error_code
        if error is None:
            continue
        if api_key not in SHAPES and api_key != _METADATA:
            return None
        if fault.topic is None:
            forced.update(dict.fromkeys(named, error))
        elif api_key == _METADATA and fault.partition is not None:
            forced[(fault.topic, fault.partition)] = error  # Metadata: that partition's error
        elif matched:
            forced.update(dict.fromkeys(matched, error))
        else:
            forced[(fault.topic, None)] = error
    return forced


def _partition_errors(request: _Request, forced: Forced, names: Names) -> _Action:
    """Produce/Fetch/ListOffsets: the faulted partitions answer the error and are not forwarded
    (a failed Produce writes nothing); the rest of the request goes to the broker."""
    shape = SHAPES[request.prefix.api_key]

    def verdict(topic: str, partition: int) -> ErrorCode | None:
        return forced.get((topic, partition)) or forced.get((topic, None))

    payload, rejected, left = entities.split(request.payload, shape, names, verdict)
    expect = not (request.prefix.api_key == 0 and int(payload.acks) == 0)
    if not left:
        if not expect:
            return _Reply(None)
        return _Reply(
            request.encode_response(entities.merge(blank(request.response_schema()), shape, rejected))
        )

    async def on_response(raw: bytes) -> bytes:
        return request.encode_response(entities.merge(request.decode_response(raw), shape, rejected))

    return _Forward(request.reencode(payload), on_response, expect)


def _metadata_errors(request: _Request, forced: Forced) -> ResponseHook:
    """A topic-scoped fault answers the topic's error; a partition-scoped one makes that
    partition report the error and no leader, as Kafka does while it has none."""

    async def on_response(raw: bytes) -> bytes:
        response = request.decode_response(raw)
        topics = []
        for topic in response.topics:
            error = forced.get((topic.name, None))
            if error is not None:
                topic = dataclasses.replace(topic, error_code=error, partitions=())
            else:
                parts = []
                for part in topic.partitions:
                    error = forced.get((topic.name, int(part.partition_index)))
                    if error is not None:
                        part = dataclasses.replace(part, error_code=error, leader_id=-1)
                    parts.append(part)
                topic = dataclasses.replace(topic, partitions=tuple(parts))
            topics.append(topic)
        return request.encode_response(dataclasses.replace(response, topics=tuple(topics)))

    return on_response


def _answered_late(action: _Action, seconds: float) -> _Action:
    """The request takes effect (forwarded now); its answer is held back ``seconds``."""
    if isinstance(action, _Forward):
        inner = action.hook

        async def held(raw: bytes) -> bytes:
            raw = await inner(raw) if inner is not None else raw
            await asyncio.sleep(seconds)
            return raw

        return dataclasses.replace(action, hook=held)
    return action


_PARTITION_INDEX = ("partition_index", "index", "partition")


def error_response(request: _Request, error: ErrorCode) -> Any:
    """A locally built response carrying ``error`` where this API reports errors: top level,
    per coordinator key (FindCoordinator v4+), per topic, or per partition (OffsetCommit)."""
    schema = request.response_schema()
    fields = field_names(schema)
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
            topics = getattr(request.payload, "topics", None) or ()
            return blank(schema, **{name: tuple(_topic_error(entry, t, error) for t in topics)})
    raise ValueError(f"cannot build an error response for api {request.prefix.api_key}")


def _topic_error(entry: type[Any], topic: Any, error: ErrorCode) -> Any:
    if "error_code" in field_names(entry):
        return blank(entry, name=topic.name, error_code=error)
    part_cls = element_type(entry, "partitions")
    index_field = next(f for f in _PARTITION_INDEX if f in field_names(part_cls))
    parts = tuple(
        blank(part_cls, **{index_field: int(next(getattr(p, f) for f in _PARTITION_INDEX if hasattr(p, f)))},
              error_code=error)
        for p in topic.partitions
    )  # fmt: skip
    return blank(entry, name=topic.name, partitions=parts)


__all__ = ["FaultProxy", "Rejected"]
