"""ordo: Kafka producer groups (KIP-509) and ordered topic expansion (KIP-253) on Kubernetes.

The SDK used inside producer and consumer pods::

    from ordo import GroupProducer, OrderedProducer, GatedConsumer, AsyncConsumer

Names load on first use, so ``import ordo.api`` (the pure models, as the operator uses them) does
not load the Kafka clients. The pure planning code lives in ``ordo.assignment``,
``ordo.epochs`` and ``ordo.partitioners``; the API models in ``ordo.api``; the independent
verifier in ``ordo.verify``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_WHERE = {
    "GroupProducer": "ordo.group",
    "Rebalance": "ordo.group",
    "SourceTransaction": "ordo.group",
    "OrderedProducer": "ordo.ordered_producer",
    "GatedConsumer": "ordo.gated_consumer",
    "AsyncConsumer": "ordo.async_consumer",
    "Batch": "ordo.async_consumer",
    "RoundRobinPartitioner": "ordo.partitioners",
    "Murmur2Partitioner": "ordo.partitioners",
    "Transaction": "ordo.transactions",
    **dict.fromkeys(
        (
            "OrdoError",
            "ConfigError",
            "ProducerClosedError",
            "ProduceBlockedError",
            "ProducerFencedError",
            "NotOwnedError",
            "TransactionScopeError",
            "UndeclaredPartitionError",
            "UndeclaredGroupError",
            "ConsumerClosedError",
            "CheckpointError",
            "DeliveryError",
            "OffsetStoreError",
        ),
        "ordo.errors",
    ),
}

__all__ = [
    "AsyncConsumer",
    "Batch",
    "CheckpointError",
    "ConfigError",
    "ConsumerClosedError",
    "DeliveryError",
    "GatedConsumer",
    "GroupProducer",
    "Murmur2Partitioner",
    "NotOwnedError",
    "OffsetStoreError",
    "OrderedProducer",
    "OrdoError",
    "ProduceBlockedError",
    "ProducerClosedError",
    "ProducerFencedError",
    "Rebalance",
    "RoundRobinPartitioner",
    "SourceTransaction",
    "Transaction",
    "TransactionScopeError",
    "UndeclaredGroupError",
    "UndeclaredPartitionError",
    "__version__",
]

if TYPE_CHECKING:  # what the names above are, for type checkers (loaded lazily below)
    from .async_consumer import AsyncConsumer as AsyncConsumer
    from .async_consumer import Batch as Batch
    from .errors import CheckpointError as CheckpointError
    from .errors import ConfigError as ConfigError
    from .errors import ConsumerClosedError as ConsumerClosedError
    from .errors import DeliveryError as DeliveryError
    from .errors import NotOwnedError as NotOwnedError
    from .errors import OffsetStoreError as OffsetStoreError
    from .errors import OrdoError as OrdoError
    from .errors import ProduceBlockedError as ProduceBlockedError
    from .errors import ProducerClosedError as ProducerClosedError
    from .errors import ProducerFencedError as ProducerFencedError
    from .errors import TransactionScopeError as TransactionScopeError
    from .errors import UndeclaredGroupError as UndeclaredGroupError
    from .errors import UndeclaredPartitionError as UndeclaredPartitionError
    from .gated_consumer import GatedConsumer as GatedConsumer
    from .group import GroupProducer as GroupProducer
    from .group import Rebalance as Rebalance
    from .group import SourceTransaction as SourceTransaction
    from .ordered_producer import OrderedProducer as OrderedProducer
    from .partitioners import Murmur2Partitioner as Murmur2Partitioner
    from .partitioners import RoundRobinPartitioner as RoundRobinPartitioner
    from .transactions import Transaction as Transaction


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'ordo' has no attribute {name!r}")
    value = getattr(import_module(where), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
