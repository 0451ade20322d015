"""Zombie fencing: the latest producer id/epoch InitProducerId handed out per transactional id.

Tansu answers a fenced producer's Produce with PRODUCER_FENCED (abortable for librdkafka) and drops
the connection on its EndTxn, so the proxy answers requests of an older epoch itself, with the
errors Apache Kafka 3.x gives.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode


@dataclass(slots=True)
class ProducerEpochs:
    _latest: dict[str, tuple[int, int]] = field(default_factory=dict)  # txn id -> (pid, epoch)
    _owner: dict[int, str] = field(default_factory=dict)  # pid -> txn id

    def granted(self, transactional_id: str, producer_id: int, epoch: int) -> list[int]:
        """Record an InitProducerId answer; returns the producer ids whose transaction it ended."""
        previous = self._latest.get(transactional_id)
        self._latest[transactional_id] = (producer_id, epoch)
        self._owner[producer_id] = transactional_id
        ended = [producer_id]
        if previous is not None and previous[0] != producer_id:
            ended.append(previous[0])
        return ended

    def fenced(self, producer_id: int, epoch: int, transactional_id: str | None = None) -> bool:
        """True when a newer InitProducerId for the same transactional id superseded this one."""
        owner = transactional_id or self._owner.get(producer_id)
        latest = self._latest.get(owner) if owner is not None else None
        if latest is None:
            return False
        if producer_id == latest[0]:
            return epoch < latest[1]
        return self._owner.get(producer_id) == owner


def fenced_error(api_key: int, version: int) -> ErrorCode:
    """Kafka 3.x: Produce and TxnOffsetCommit fail in the log layer with INVALID_PRODUCER_EPOCH;
    the transaction coordinator answers PRODUCER_FENCED, converted to INVALID_PRODUCER_EPOCH for
    request versions that predate it (KIP-588)."""
    if api_key in (0, 28):
        return ErrorCode.invalid_producer_epoch
    first_with_fenced = {22: 4, 24: 2, 25: 2, 26: 2}.get(api_key, 0)
    return ErrorCode.producer_fenced if version >= first_with_fenced else ErrorCode.invalid_producer_epoch
