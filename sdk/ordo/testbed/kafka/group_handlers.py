"""Consumer-group APIs answered by the proxy itself (never forwarded to Tansu): kio requests in,
the group state machine and offset store (``Coordinator``) in between, kio responses out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from . import wire
from .core import ProxyCore
from .entities import element_type, fit
from .groups import JoinRequest, JoinResult, State, SyncResult
from .handlers import Action, Forced, Handler, Later, Request
from .offsets import Committed

R = TypeVar("R")

MAX_METADATA = 4096  # Kafka's offset.metadata.max.bytes
NO_AUTHORIZED_OPERATIONS = -(2**31)


def _deferred(request: Request, encode: Callable[[R], Any]) -> tuple[Later, Callable[[R], None]]:
    """A response the state machine completes later, and the waiter that completes it."""
    future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def waiter(result: R) -> None:
        if not future.done():
            future.set_result(wire.encode_response(encode(result), request.prefix.correlation_id))

    return Later(future), waiter


async def join_group(core: ProxyCore, request: Request, forced: Forced) -> Action:
    p = request.payload
    schema = request.response_schema()
    member_cls = element_type(schema, "members")

    def encode(result: JoinResult) -> Any:
        members = tuple(
            fit(member_cls, member_id=m.member_id, group_instance_id=m.instance_id, metadata=m.metadata)
            for m in result.members
        )
        return fit(
            schema,
            error_code=result.error,
            generation_id=result.generation,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            leader=result.leader,
            member_id=result.member_id,
            members=members,
        )

    session = p.session_timeout.total_seconds()
    rebalance = getattr(p, "rebalance_timeout", None)
    join = JoinRequest(
        group_id=p.group_id,
        member_id=p.member_id,
        client_id=request.header.client_id or "",
        client_host=request.peer,
        instance_id=getattr(p, "group_instance_id", None),
        session_timeout=session,
        rebalance_timeout=rebalance.total_seconds() if rebalance is not None else session,
        protocol_type=p.protocol_type,
        protocols=tuple((proto.name, bytes(proto.metadata)) for proto in p.protocols),
        require_known_member_id=request.prefix.api_version >= 4,
    )
    later, waiter = _deferred(request, encode)
    core.coordinator.groups.join(core.coordinator.now(), join, waiter)
    core.coordinator.changed()
    return later


async def sync_group(core: ProxyCore, request: Request, forced: Forced) -> Action:
    p = request.payload
    schema = request.response_schema()

    def encode(result: SyncResult) -> Any:
        return fit(
            schema,
            error_code=result.error,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )

    later, waiter = _deferred(request, encode)
    core.coordinator.groups.sync(
        core.coordinator.now(),
        p.group_id,
        int(p.generation_id),
        p.member_id,
        getattr(p, "protocol_type", None),
        getattr(p, "protocol_name", None),
        {a.member_id: bytes(a.assignment) for a in p.assignments},
        waiter,
    )
    core.coordinator.changed()
    return later


async def heartbeat(core: ProxyCore, request: Request, forced: Forced) -> Action:
    p = request.payload
    error = core.coordinator.groups.heartbeat(
        core.coordinator.now(), p.group_id, int(p.generation_id), p.member_id
    )
    core.coordinator.changed()
    return request.reply(fit(request.response_schema(), error_code=error))


async def leave_group(core: ProxyCore, request: Request, forced: Forced) -> Action:
    p = request.payload
    schema = request.response_schema()
    leaving = [m.member_id for m in p.members] if hasattr(p, "members") else [p.member_id]
    errors = core.coordinator.groups.leave(core.coordinator.now(), p.group_id, leaving)
    core.coordinator.changed()
    if not hasattr(p, "members"):
        return request.reply(fit(schema, error_code=errors[0]))
    member_cls = element_type(schema, "members")
    members = tuple(
        fit(member_cls, member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=error)
        for m, error in zip(p.members, errors, strict=True)
    )
    return request.reply(fit(schema, error_code=ErrorCode.none, members=members))


def _partition_errors(
    core: ProxyCore, topics: Any, group_error: ErrorCode, schema: type[Any]
) -> tuple[Any, dict[tuple[str, int], Committed]]:
    """Per-partition results of an (Txn)OffsetCommit and the offsets that may be stored."""
    topic_cls = element_type(schema, "topics")
    part_cls = element_type(topic_cls, "partitions")
    accepted: dict[tuple[str, int], Committed] = {}
    results = []
    for topic in topics:
        parts = []
        visible = core.registry.visible(topic.name)
        for part in topic.partitions:
            index = int(part.partition_index)
            metadata = part.committed_metadata
            if visible is None or not 0 <= index < visible:
                error = ErrorCode.unknown_topic_or_partition
            elif group_error != ErrorCode.none:
                error = group_error
            elif metadata is not None and len(metadata.encode()) > MAX_METADATA:
                error = ErrorCode.offset_metadata_too_large
            else:
                error = ErrorCode.none
                epoch = int(getattr(part, "committed_leader_epoch", -1))
                accepted[(topic.name, index)] = Committed(int(part.committed_offset), epoch, metadata)
            parts.append(fit(part_cls, partition_index=index, error_code=error))
        results.append(fit(topic_cls, name=topic.name, partitions=tuple(parts)))
    return fit(schema, topics=tuple(results)), accepted


async def offset_commit(core: ProxyCore, request: Request, forced: Forced) -> Action:
    p = request.payload
    coordinator = core.coordinator
    if not p.group_id:
        error = ErrorCode.invalid_group_id
    else:
        generation = int(p.generation_id_or_member_epoch)
        error = coordinator.groups.validate_commit(coordinator.now(), p.group_id, generation, p.member_id)
    response, accepted = _partition_errors(core, p.topics, error, request.response_schema())
    coordinator.offsets.commit(p.group_id, accepted)
    coordinator.changed()
    return request.reply(response)


async def offset_fetch(core: ProxyCore, request: Request, forced: Forced) -> Action:
    p = request.payload
    schema = request.response_schema()
    stable = bool(getattr(p, "require_stable", False))
    if hasattr(p, "groups"):  # v8+: several groups per request
        group_cls = element_type(schema, "groups")
        groups = tuple(
            fit(
                group_cls, group_id=g.group_id, topics=_fetched(core, group_cls, g.group_id, g.topics, stable)
            )
            for g in p.groups
        )
        return request.reply(fit(schema, groups=groups))
    topics = _fetched(core, schema, p.group_id, p.topics, stable)
    return request.reply(fit(schema, topics=topics, error_code=ErrorCode.none))


def _fetched(core: ProxyCore, holder: type[Any], group: str, topics: Any, stable: bool) -> tuple[Any, ...]:
    offsets = core.coordinator.offsets
    wanted = None if topics is None else [(t.name, int(i)) for t in topics for i in t.partition_indexes]
    found = offsets.fetch(group, wanted)
    by_topic: dict[str, list[tuple[int, Committed | None]]] = {}
    for topic, partition in wanted if wanted is not None else sorted(found):
        by_topic.setdefault(topic, []).append((partition, found.get((topic, partition))))
    topic_cls = element_type(holder, "topics")
    part_cls = element_type(topic_cls, "partitions")
    results = []
    for topic, parts in by_topic.items():
        entries = []
        for partition, committed in parts:
            error = ErrorCode.none
            if stable and offsets.unstable(group, (topic, partition)):
                error, committed = ErrorCode.unstable_offset_commit, None
            entries.append(
                fit(
                    part_cls,
                    partition_index=partition,
                    committed_offset=committed.offset if committed else -1,
                    committed_leader_epoch=committed.leader_epoch if committed else -1,
                    metadata=committed.metadata if committed else "",
                    error_code=error,
                )
            )
        results.append(fit(topic_cls, name=topic, partitions=tuple(entries)))
    return tuple(results)


async def list_groups(core: ProxyCore, request: Request, forced: Forced) -> Action:
    p = request.payload
    schema = request.response_schema()
    group_cls = element_type(schema, "groups")
    states = {s.lower() for s in getattr(p, "states_filter", ())}
    types = {t.lower() for t in getattr(p, "types_filter", ())}
    groups = []
    for group_id in core.coordinator.groups.group_ids():
        view = core.coordinator.groups.describe(group_id)
        assert view is not None
        if (states and view.state.value.lower() not in states) or (types and "classic" not in types):
            continue
        groups.append(
            fit(
                group_cls,
                group_id=group_id,
                protocol_type=view.protocol_type,
                group_state=view.state.value,
                group_type="classic",
            )
        )
    return request.reply(fit(schema, error_code=ErrorCode.none, groups=tuple(groups)))


async def describe_groups(core: ProxyCore, request: Request, forced: Forced) -> Action:
    p = request.payload
    schema = request.response_schema()
    group_cls = element_type(schema, "groups")
    member_cls = element_type(group_cls, "members")
    described = []
    for group_id in p.groups:
        view = core.coordinator.groups.describe(group_id)
        if view is None:  # Kafka (classic coordinator, v0-5): no error, state Dead
            described.append(
                fit(
                    group_cls,
                    group_id=group_id,
                    group_state="Dead",
                    authorized_operations=NO_AUTHORIZED_OPERATIONS,
                )
            )
            continue
        members = tuple(
            fit(
                member_cls,
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata,
                member_assignment=m.assignment,
            )
            for m in view.members
        )
        described.append(
            fit(
                group_cls,
                error_code=ErrorCode.none,
                group_id=group_id,
                group_state=view.state.value,
                protocol_type=view.protocol_type,
                protocol_data=view.protocol_name,
                members=members,
                authorized_operations=NO_AUTHORIZED_OPERATIONS,
            )
        )
    return request.reply(fit(schema, groups=tuple(described)))


async def delete_groups(core: ProxyCore, request: Request, forced: Forced) -> Action:
    schema = request.response_schema()
    result_cls = element_type(schema, "results")
    results = []
    for group_id in request.payload.groups_names:
        error = core.coordinator.groups.delete(group_id)
        if error == ErrorCode.none:
            core.coordinator.offsets.delete_group(group_id)
        results.append(fit(result_cls, group_id=group_id, error_code=error))
    return request.reply(fit(schema, results=tuple(results)))


async def txn_offset_commit(core: ProxyCore, request: Request, forced: Forced) -> Action:
    """Offsets of a transaction: staged per producer id until its EndTxn commits them."""
    p = request.payload
    coordinator = core.coordinator
    if coordinator.producers.fenced(int(p.producer_id), int(p.producer_epoch), p.transactional_id):
        error = ErrorCode.invalid_producer_epoch  # Kafka: the stale epoch fails in the log layer
    else:
        generation = int(getattr(p, "generation_id", -1))
        error = coordinator.groups.validate_txn_commit(p.group_id, generation, getattr(p, "member_id", ""))
    response, accepted = _partition_errors(core, p.topics, error, request.response_schema())
    if accepted:
        coordinator.offsets.stage(int(p.producer_id), p.group_id, accepted)
    return request.reply(response)


GROUP_HANDLERS: dict[int, Handler] = {
    8: offset_commit,
    9: offset_fetch,
    11: join_group,
    12: heartbeat,
    13: leave_group,
    14: sync_group,
    15: describe_groups,
    16: list_groups,
    28: txn_offset_commit,
    42: delete_groups,
}

# Highest version implemented per API (ApiVersions advertises no more).
GROUP_VERSIONS = {8: 9, 9: 9, 11: 9, 12: 4, 13: 5, 14: 5, 15: 5, 16: 5, 28: 4, 42: 2}

__all__ = ["GROUP_HANDLERS", "GROUP_VERSIONS", "State"]
