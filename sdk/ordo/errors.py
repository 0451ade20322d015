"""Exceptions of ordo's SDK. Each message says what went wrong and what to do about it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "CheckpointError",
    "ConfigError",
    "ConsumerClosedError",
    "DeliveryError",
    "MisplacedRecordError",
    "NotOwnedError",
    "OffsetStoreError",
    "OrdoError",
    "ProduceBlockedError",
    "ProducerClosedError",
    "ProducerFencedError",
    "TransactionScopeError",
    "UndeclaredGroupError",
    "UndeclaredPartitionError",
]


class OrdoError(Exception):
    """Base of every error the SDK raises on purpose."""


class ConfigError(OrdoError, ValueError):
    """Missing or invalid configuration (environment, credentials, options)."""


class ProducerClosedError(OrdoError):
    """The producer was closed; create a new one."""


class ProduceBlockedError(OrdoError):
    """produce() waited longer than its timeout: the topic is fenced for an expansion, or the
    producer lost its liveness. Nothing was sent; retry the same record later."""


class ProducerFencedError(OrdoError):
    """Another producer took over this transactional id: this one must stop writing."""


class NotOwnedError(OrdoError):
    """The source partition is not assigned to this member (any more)."""


class TransactionScopeError(OrdoError):
    """A write outside what the transaction declared (KIP-609): nothing was sent, the
    transaction is aborted."""


class ConsumerClosedError(OrdoError):
    """The consumer was closed, or its fetcher failed (the cause is chained); create a new one."""


class OffsetStoreError(OrdoError, ValueError):
    """An offset a GatedConsumer cannot store or commit: it would count as processed records the
    gate never handed out (past a held record, or past what was fetched); nothing was stored."""


class CheckpointError(OrdoError, TypeError):
    """A checkpoint that is not a string, or a checkpoint record that cannot be read."""


class DeliveryError(OrdoError):
    """Records were not acknowledged by Kafka; the checkpoint covering them was not written."""


class UndeclaredPartitionError(TransactionScopeError):
    """KIP-609 UNKNOWN_TOPIC_OR_PARTITION: a record for a partition the transaction did not
    declare (or a declared partition that does not exist)."""


class UndeclaredGroupError(TransactionScopeError):
    """KIP-609 INVALID_GROUP_ID: offsets of a consumer group the transaction did not declare."""


class MisplacedRecordError(OrdoError):
    """Records a gated reader did not deliver: keyed records placed by an old partition count
    after their partition's threshold (a producer that missed an expansion, or one whose keyed
    records are not placed by murmur2), whose keys' order no reader can keep. ``records``: the
    confluent_kafka Messages. The consumer's next call goes on after them, and they count as
    processed then; a consumer that stops here reads them again. To hand such records to a
    callback (a dead-letter topic) or deliver them, pass ``on_misplaced`` (docs/async_consumer.md,
    README "Guarantees and limits")."""

    def __init__(self, message: str, records: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.records = list(records)
