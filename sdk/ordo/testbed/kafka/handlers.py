"""Per-API request handlers: each decides to forward (maybe rewritten, maybe with a response hook)
or to answer locally. APIs without a handler are forwarded as raw bytes."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32Timedelta

from . import entities, wire
from .core import MIN_FETCH_WAIT_MS, ProxyCore
from .entities import FETCH, LIST_OFFSETS, PRODUCE, Shape, blank, element_type
from .records import batches, hole_at

_log = logging.getLogger(__name__)

ResponseHook = Callable[[bytes], Awaitable[bytes]]
_HELD_FETCH_WAIT = 0.05  # seconds a read_committed fetch held at an open transaction waits
Forced = dict[tuple[str, int | None], ErrorCode]


@dataclass
class Request:
    """One client request; decoded lazily and at most once."""

    prefix: wire.RequestPrefix
    body: bytes
    peer: str = ""  # the client's host, as group descriptions report it
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

    def replace_payload(self, payload: Any) -> None:
        """Rewrite the request itself (later handlers see and forward the new payload)."""
        self._decoded = (self.header, payload)
        self.body = self.reencode(payload)

    def reencode(self, payload: Any) -> bytes:
        return wire.encode_request_with(self.header, payload)

    def response_schema(self) -> type[Any]:
        schema = wire.response_schema(self.prefix.api_key, self.prefix.api_version)
        assert schema is not None
        return schema

    def reply(self, payload: Any) -> Reply:
        return Reply(wire.encode_response(payload, self.prefix.correlation_id))


@dataclass
class Forward:
    body: bytes
    hook: ResponseHook | None = None
    expect_response: bool = True


@dataclass
class Reply:
    body: bytes | None  # None: the client expects no response (Produce with acks=0)


@dataclass
class Later:
    """Answered locally once ``response`` resolves (e.g. a JoinGroup waiting for the rebalance)."""

    response: asyncio.Future[bytes]


@dataclass
class Drop:
    pass


Action = Forward | Reply | Later | Drop
Handler = Callable[[ProxyCore, Request, Forced], Awaitable[Action]]

SHAPES: dict[int, Shape] = {0: PRODUCE, 1: FETCH, 2: LIST_OFFSETS}


def targets(request: Request) -> list[tuple[str, int | None]]:
    """(topic, partition) pairs a request names, for fault matching; partition None: topic level."""
    shape = SHAPES.get(request.prefix.api_key)
    if shape is not None:
        return entities.pairs(request.payload, shape)
    topics = getattr(request.payload, "topics", None) or ()
    return [(t.name, None) for t in topics if isinstance(getattr(t, "name", None), str)]


def _verdict(core: ProxyCore, forced: Forced) -> Callable[[str, int], ErrorCode | None]:
    def verdict(topic: str, partition: int) -> ErrorCode | None:
        error = forced.get((topic, partition)) or forced.get((topic, None))
        if error is not None:
            return error
        visible = core.registry.visible(topic)
        if visible is None or not 0 <= partition < visible:
            return ErrorCode.unknown_topic_or_partition
        return None

    return verdict


async def _partitioned(
    core: ProxyCore, request: Request, forced: Forced, hook: Callable[[Any], Awaitable[Any]] | None
) -> Action:
    """Common path for Produce/Fetch/ListOffsets: reject unknown/invisible or faulted partitions
    the way Kafka would, forward the rest, and merge the rejections back into the response."""
    shape = SHAPES[request.prefix.api_key]
    payload, rejected, left = entities.split(request.payload, shape, _verdict(core, forced))
    expect = not (request.prefix.api_key == 0 and int(payload.acks) == 0)
    if not left:
        if not expect:
            return Reply(None)
        return request.reply(entities.merge(blank(request.response_schema()), shape, rejected))
    if not rejected and hook is None:
        return Forward(request.body, None, expect)
    body = request.reencode(payload) if rejected else request.body

    async def on_response(raw: bytes) -> bytes:
        response = wire.decode_response(request.prefix.api_key, request.prefix.api_version, raw)
        if hook is not None:
            response = await hook(response)
        return wire.encode_response(entities.merge(response, shape, rejected), request.prefix.correlation_id)

    return Forward(body, on_response, expect)


async def produce(core: ProxyCore, request: Request, forced: Forced) -> Action:
    return await _partitioned(core, request, forced, None)


async def fetch(core: ProxyCore, request: Request, forced: Forced) -> Action:
    if request.payload.max_wait.total_seconds() <= 0:
        # Tansu answers max_wait 0 with an empty topic list; Kafka answers at once with data.
        wait = i32Timedelta.parse(datetime.timedelta(milliseconds=MIN_FETCH_WAIT_MS))
        request.replace_payload(dataclasses.replace(request.payload, max_wait=wait))
    isolation = int(request.payload.isolation_level)
    if isolation == 1:  # read everything, cut at the last stable offset the log itself gives
        request.replace_payload(dataclasses.replace(request.payload, isolation_level=i8(0)))
    wait = request.payload.max_wait.total_seconds()
    offsets = {(t, p): 0 for t, p in entities.pairs(request.payload, FETCH) if p is not None}
    for topic in request.payload.topics:
        for part in topic.partitions:
            offsets[(topic.topic, int(part.partition))] = int(part.fetch_offset)

    async def hook(response: Any) -> Any:
        topics, held, returned = [], False, False
        for topic in response.responses:
            parts = []
            for part in topic.partitions:
                fixed = await _fix_fetch_partition(core, topic.topic, part, isolation, offsets)
                held = held or len(fixed.records or b"") < len(part.records or b"")
                returned = returned or bool(fixed.records)
                parts.append(fixed)
            topics.append(dataclasses.replace(topic, partitions=tuple(parts)))
        if held and not returned:
            # Only records past the last stable offset came back: Kafka would wait for the
            # transaction to end (up to max_wait); answering at once would make the consumer spin.
            await asyncio.sleep(min(wait, _HELD_FETCH_WAIT))
        return dataclasses.replace(response, responses=tuple(topics))

    return await _partitioned(core, request, forced, hook)


async def _fix_fetch_partition(
    core: ProxyCore, topic: str, part: Any, isolation: int, offsets: dict[tuple[str, int], int]
) -> Any:
    if part.error_code != ErrorCode.none:
        return part
    partition = int(part.partition_index)
    fetch_offset = offsets.get((topic, partition), 0)
    changes: dict[str, Any] = {}
    records = part.records
    hole = hole_at(records, fetch_offset, core.lasting_holes(topic, partition))
    if hole is not None and records is not None:
        # only what continues the log: the client fetches the rest again, once Tansu stored it
        records = changes["records"] = records[: hole.after.start]
        _log.debug("%s[%d] fetch from %d: offsets %d-%d missing, answered up to them", topic,
                   partition, fetch_offset, hole.start, hole.end - 1)  # fmt: skip
    high = int(part.high_watermark)
    end = high
    for batch in batches(records):
        end = max(end, batch.last_offset + 1)
    if end > high:  # never report a high watermark below records we hand out
        changes["high_watermark"] = end
    if isolation != 1:
        return dataclasses.replace(part, **changes) if changes else part
    # read_committed: only what lies below the last stable offset, with the aborted transactions
    # in it listed (the client drops their records), as Kafka answers
    stable = await core.stable_offset(topic, partition, records, max(end, high))
    kept, upper, transactional, cut = 0, fetch_offset, False, False
    for batch in batches(records):
        if batch.last_offset >= stable:
            cut = True
            break
        kept, upper = batch.end, batch.last_offset + 1
        transactional = transactional or (batch.transactional and not batch.control)
    changes["last_stable_offset"] = stable
    if cut and records is not None:  # a truncated trailing batch stays: the client skips it
        changes["records"] = records[:kept]
    if transactional:
        index = core.txn_indexes[(topic, partition)]
        aborted = index.overlapping(fetch_offset, upper)
        entry = element_type(type(part), "aborted_transactions")
        changes["aborted_transactions"] = tuple(
            entry(producer_id=t.producer_id, first_offset=t.first_offset) for t in aborted
        )
        if aborted:
            _log.debug(
                "%s[%d] read_committed from %d below %d (stable %d): aborted %s",
                topic, partition, fetch_offset, upper, stable,
                [(t.producer_id, t.first_offset, t.marker_offset) for t in aborted],
            )  # fmt: skip
    return dataclasses.replace(part, **changes)


async def list_offsets(core: ProxyCore, request: Request, forced: Forced) -> Action:
    isolation = int(getattr(request.payload, "isolation_level", 0))
    latest: set[tuple[str, int]] = set()
    earliest: set[tuple[str, int]] = set()
    # Tansu drops the connection on MAX_TIMESTAMP (-3); answer it as a broker without it would.
    forced = dict(forced)
    for topic in request.payload.topics:
        for part in topic.partitions:
            if int(part.timestamp) == -1:
                latest.add((topic.name, int(part.partition_index)))
            elif int(part.timestamp) == -2:
                earliest.add((topic.name, int(part.partition_index)))
            elif int(part.timestamp) == -3:
                forced[(topic.name, int(part.partition_index))] = ErrorCode.unsupported_version

    async def hook(response: Any) -> Any:
        wanted = [
            (t.name, int(p.partition_index))
            for t in response.topics
            for p in t.partitions
            if (t.name, int(p.partition_index)) in latest and p.error_code == ErrorCode.none
        ]
        marks = await core.watermarks(wanted, stable=isolation == 1) if wanted else {}
        topics = []
        for topic in response.topics:
            parts = []
            for part in topic.partitions:
                where = (topic.name, int(part.partition_index))
                mark = marks.get(where)
                if mark is not None:
                    offset = mark.stable if isolation == 1 else mark.high
                    part = dataclasses.replace(part, offset=offset, timestamp=-1)
                elif (
                    where in earliest
                    and part.error_code == ErrorCode.none
                    and int(part.offset) > 0
                    and not core.lasting_holes(*where)(0)
                ):
                    # Tansu answers the first offset it has stored, which is past a batch it has
                    # reserved and not stored yet (a new partition's first records): a reader
                    # starting there skips them for good. Tansu never deletes records, so every
                    # log starts at 0; a fetch there waits out the hole (records.hole_at), and
                    # offsets missing past the grace period are passed over as there.
                    _log.debug("%s[%d]: earliest %d answered as 0", *where, int(part.offset))
                    part = dataclasses.replace(part, offset=0)
                parts.append(part)
            topics.append(dataclasses.replace(topic, partitions=tuple(parts)))
        return dataclasses.replace(response, topics=tuple(topics))

    return await _partitioned(core, request, forced, hook if latest or earliest else None)


async def metadata(core: ProxyCore, request: Request, forced: Forced) -> Action:
    payload = request.payload
    rejected: dict[str, ErrorCode] = {}
    if payload.topics is not None:
        allow = bool(getattr(payload, "allow_auto_topic_creation", True))
        kept = []
        for topic in payload.topics:
            name = topic.name
            error = forced.get((name, None)) if name is not None else None
            if name is not None and error is None and core.registry.visible(name) is None:
                if allow and core.config.auto_create_topics:
                    error = await core.create_physical(name, core.config.default_partitions)
                else:
                    error = ErrorCode.unknown_topic_or_partition
            if error is not None and error != ErrorCode.none:
                rejected[name] = error
            else:
                kept.append(topic)
        if rejected:
            # Never let an unknown name reach Tansu: it would auto-create it with its own count.
            payload = dataclasses.replace(payload, topics=tuple(kept))
    body = request.reencode(payload) if rejected else request.body

    async def on_response(raw: bytes) -> bytes:
        response = wire.decode_response(request.prefix.api_key, request.prefix.api_version, raw)
        topic_cls = element_type(type(response), "topics")
        topics = []
        for topic in response.topics:
            visible = core.registry.visible(topic.name) if topic.name else None
            if visible is None and topic.name and topic.error_code == ErrorCode.none:
                visible = core.registry.add_if_absent(topic.name, len(topic.partitions))
            if visible is not None:
                parts = tuple(p for p in topic.partitions if int(p.partition_index) < visible)
                topic = dataclasses.replace(topic, partitions=parts)
            if any(t == topic.name and p is not None for t, p in forced):
                topic = _leaderless(topic, forced)
            topics.append(topic)
        for name, error in rejected.items():
            topics.append(blank(topic_cls, name=name, error_code=error, partitions=()))
        response = dataclasses.replace(
            response, brokers=_rewrite_hosts(core, response.brokers), topics=tuple(topics)
        )
        return wire.encode_response(response, request.prefix.correlation_id)

    return Forward(body, on_response)


def _leaderless(topic: Any, forced: Forced) -> Any:
    """A partition-scoped Metadata fault: that partition reports the error and no leader, as
    Kafka does while a partition has no leader (clients treat it as unavailable)."""
    parts = []
    for part in topic.partitions:
        error = forced.get((topic.name, int(part.partition_index)))
        if error is not None:
            part = dataclasses.replace(part, error_code=error, leader_id=-1)
        parts.append(part)
    return dataclasses.replace(topic, partitions=tuple(parts))


def _rewrite_hosts(core: ProxyCore, brokers: tuple[Any, ...]) -> tuple[Any, ...]:
    host, port = core.advertised
    return tuple(
        dataclasses.replace(b, host=host, port=port) if b.host and b.port >= 0 else b for b in brokers
    )


def _rewriting(attr: str | None) -> Handler:
    """Handler that points every broker address in the response at the proxy."""

    async def handler(core: ProxyCore, request: Request, forced: Forced) -> Action:
        async def on_response(raw: bytes) -> bytes:
            response = wire.decode_response(request.prefix.api_key, request.prefix.api_version, raw)
            host, port = core.advertised
            if attr is not None:
                response = dataclasses.replace(
                    response, **{attr: _rewrite_hosts(core, getattr(response, attr))}
                )
            elif response.port >= 0 and response.host:
                response = dataclasses.replace(response, host=host, port=port)
            return wire.encode_response(response, request.prefix.correlation_id)

        return Forward(request.body, on_response)

    return handler


async def find_coordinator(core: ProxyCore, request: Request, forced: Forced) -> Action:
    return await _rewriting("coordinators" if request.prefix.api_version >= 4 else None)(
        core, request, forced
    )


async def create_topics(core: ProxyCore, request: Request, forced: Forced) -> Action:
    payload = request.payload
    limit = core.config.max_partitions
    requested: dict[str, int] = {}
    rejected: dict[str, tuple[ErrorCode, str]] = {}
    kept = []
    for topic in payload.topics:
        count = int(topic.num_partitions)
        if topic.assignments:
            count = len(topic.assignments)
        elif count == -1:
            count = core.config.default_partitions
        if count <= 0:
            rejected[topic.name] = (
                ErrorCode.invalid_partitions,
                "Number of partitions must be larger than 0.",
            )
        elif count > limit:
            rejected[topic.name] = (ErrorCode.invalid_partitions, _over_limit(count, limit))
        else:
            requested[topic.name] = count
            kept.append(dataclasses.replace(topic, num_partitions=limit, assignments=()))
    schema = request.response_schema()
    result_cls = element_type(schema, "topics")

    def add_rejected(results: list[Any]) -> None:
        for name, (error, message) in rejected.items():
            results.append(blank(result_cls, name=name, error_code=error, error_message=message))

    if not kept:
        results: list[Any] = []
        add_rejected(results)
        return request.reply(blank(schema, topics=tuple(results)))

    async def on_response(raw: bytes) -> bytes:
        response = wire.decode_response(request.prefix.api_key, request.prefix.api_version, raw)
        results = []
        for result in response.topics:
            count = requested.get(result.name)
            if count is not None and result.error_code == ErrorCode.none:
                if not payload.validate_only:
                    core.registry.set(result.name, count)
                if hasattr(result, "num_partitions"):
                    result = dataclasses.replace(result, num_partitions=count)
            results.append(result)
        add_rejected(results)
        return wire.encode_response(
            dataclasses.replace(response, topics=tuple(results)), request.prefix.correlation_id
        )

    return Forward(request.reencode(dataclasses.replace(payload, topics=tuple(kept))), on_response)


def _over_limit(count: int, limit: int) -> str:
    return (
        f"Requested {count} partitions, but the ordo testbed proxy creates every topic with a fixed "
        f"maximum of {limit} partitions (testbed max; see max_partitions)."
    )


async def delete_topics(core: ProxyCore, request: Request, forced: Forced) -> Action:
    async def on_response(raw: bytes) -> bytes:
        response = wire.decode_response(request.prefix.api_key, request.prefix.api_version, raw)
        for result in response.responses:
            if result.error_code == ErrorCode.none and result.name:
                core.registry.forget(result.name)
                for key in [k for k in core.txn_indexes if k[0] == result.name]:
                    del core.txn_indexes[key]
                core.coordinator.offsets.forget_topic(result.name)
        return raw

    return Forward(request.body, on_response)


async def create_partitions(core: ProxyCore, request: Request, forced: Forced) -> Action:
    """Kafka's CreatePartitions semantics on top of the physical maximum: raise the visible count."""
    payload = request.payload
    limit = core.config.max_partitions
    schema = request.response_schema()
    result_cls = element_type(schema, "results")
    names = [t.name for t in payload.topics]
    results = []
    for topic in payload.topics:
        error, message = ErrorCode.none, None
        current = core.registry.visible(topic.name)
        count = int(topic.count)
        if names.count(topic.name) > 1:
            error, message = ErrorCode.invalid_request, "Duplicate topic in request."
        elif current is None:
            error, message = (
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        elif count < current:
            error = ErrorCode.invalid_partitions
            message = f"Topic currently has {current} partitions, which is higher than the requested {count}."
        elif count == current:
            error, message = ErrorCode.invalid_partitions, f"Topic already has {current} partitions."
        elif topic.assignments is not None and len(topic.assignments) != count - current:
            error = ErrorCode.invalid_replica_assignment
            message = (
                f"Increasing the number of partitions by {count - current} but "
                f"{len(topic.assignments)} assignments provided."
            )
        elif count > limit:
            error, message = ErrorCode.invalid_partitions, _over_limit(count, limit)
        elif not payload.validate_only:
            core.registry.set(topic.name, count)
        results.append(blank(result_cls, name=topic.name, error_code=error, error_message=message))
    return request.reply(blank(schema, results=tuple(results)))


HANDLERS: dict[int, Handler] = {
    0: produce,
    1: fetch,
    2: list_offsets,
    3: metadata,
    10: find_coordinator,
    19: create_topics,
    20: delete_topics,
    37: create_partitions,
    60: _rewriting("brokers"),
}
