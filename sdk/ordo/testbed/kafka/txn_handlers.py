"""Transaction APIs: forwarded to Tansu (it keeps the transactions' data and markers), except that
requests of a fenced producer epoch are answered as Kafka answers them, and EndTxn settles the
transaction's offsets kept by the proxy's group coordinator."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from . import handlers, wire
from .core import ProxyCore
from .entities import element_type, fit
from .fencing import fenced_error
from .handlers import Action, Forced, Forward, Handler, Request
from .records import batches


def _fenced(core: ProxyCore, request: Request, producer_id: int, epoch: int, txn_id: str | None) -> bool:
    return core.coordinator.producers.fenced(producer_id, epoch, txn_id)


def _error(request: Request) -> ErrorCode:
    return fenced_error(request.prefix.api_key, request.prefix.api_version)


async def produce(core: ProxyCore, request: Request, forced: Forced) -> Action:
    p = request.payload
    if p.transactional_id is not None:
        forced = dict(forced)
        for topic in p.topic_data:
            for part in topic.partition_data:
                batch = next(batches(part.records), None)
                if batch is not None and _fenced(
                    core, request, batch.producer_id, batch.producer_epoch, p.transactional_id
                ):
                    forced[(topic.name, int(part.index))] = _error(request)
    return await handlers.produce(core, request, forced)


async def init_producer_id(core: ProxyCore, request: Request, forced: Forced) -> Action:
    p = request.payload
    txn_id = p.transactional_id
    if txn_id is None:
        return Forward(request.body)
    producer_id, epoch = int(getattr(p, "producer_id", -1)), int(getattr(p, "producer_epoch", -1))
    if producer_id >= 0 and _fenced(core, request, producer_id, epoch, txn_id):  # a KIP-360 epoch bump
        schema = request.response_schema()
        return request.reply(fit(schema, error_code=_error(request), producer_id=-1, producer_epoch=-1))

    async def on_response(raw: bytes) -> bytes:
        response = wire.decode_response(request.prefix.api_key, request.prefix.api_version, raw)
        if response.error_code == ErrorCode.none:
            # A new epoch ends (aborts) whatever transaction the transactional id had open.
            granted = core.coordinator.producers.granted(
                txn_id, int(response.producer_id), int(response.producer_epoch)
            )
            for ended in granted:
                core.coordinator.offsets.end_transaction(ended, commit=False)
        return raw

    return Forward(request.body, on_response)


async def add_partitions_to_txn(core: ProxyCore, request: Request, forced: Forced) -> Action:
    p = request.payload
    if not _fenced(
        core,
        request,
        int(p.v3_and_below_producer_id),
        int(p.v3_and_below_producer_epoch),
        p.v3_and_below_transactional_id,
    ):
        return Forward(request.body)
    schema = request.response_schema()
    topic_cls = element_type(schema, "results_by_topic_v3_and_below")
    part_cls = element_type(topic_cls, "results_by_partition")
    results = tuple(
        fit(
            topic_cls,
            name=topic.name,
            results_by_partition=tuple(
                fit(part_cls, partition_index=int(i), partition_error_code=_error(request))
                for i in topic.partitions
            ),
        )
        for topic in p.v3_and_below_topics
    )
    return request.reply(fit(schema, results_by_topic_v3_and_below=results))


async def add_offsets_to_txn(core: ProxyCore, request: Request, forced: Forced) -> Action:
    p = request.payload
    if _fenced(core, request, int(p.producer_id), int(p.producer_epoch), p.transactional_id):
        return request.reply(fit(request.response_schema(), error_code=_error(request)))
    return Forward(request.body)


async def end_txn(core: ProxyCore, request: Request, forced: Forced) -> Action:
    p = request.payload
    producer_id = int(p.producer_id)
    if _fenced(core, request, producer_id, int(p.producer_epoch), p.transactional_id):
        return request.reply(fit(request.response_schema(), error_code=_error(request)))
    committed = bool(p.committed)

    async def on_response(raw: bytes) -> bytes:
        response: Any = wire.decode_response(request.prefix.api_key, request.prefix.api_version, raw)
        if response.error_code == ErrorCode.none:
            core.coordinator.offsets.end_transaction(producer_id, commit=committed)
        return raw

    return Forward(request.body, on_response)


TXN_HANDLERS: dict[int, Handler] = {
    0: produce,
    22: init_producer_id,
    24: add_partitions_to_txn,
    25: add_offsets_to_txn,
    26: end_txn,
}

# AddPartitionsToTxn v4+ (batched, for broker-to-broker verification) is not implemented.
TXN_VERSIONS = {22: 5, 24: 3, 25: 4, 26: 4}
