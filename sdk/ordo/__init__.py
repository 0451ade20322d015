"""ordo: Kafka producer groups (KIP-509) and ordered topic expansion (KIP-253) on Kubernetes.

The SDK used inside producer and consumer pods::

    from ordo import GroupProducer, OrderedProducer, GatedConsumer, AsyncConsumer

Names load on first use, so ``import ordo.api`` (the pure models, as the operator uses them) does
not load the Kafka clients. The pure planning code lives in ``ordo.assignment``,
``ordo.epochs`` and ``ordo.partitioners``; the API models in ``ordo.api``; the independent
verifier in ``ordo.verify``.

``pip install ordo-kafka`` is what a consumer-only pod needs (confluent-kafka and pydantic);
``GroupProducer`` needs the extra ``group`` (the Kubernetes client) and says so when it is missing,
the ``ordo`` command's ``status`` and ``crds`` the extra ``cli``.

The C accelerators (``ordo._fastproduce``: OrderedProducer.produce()'s common case and the
partitioner's hash; ``ordo._fastscan``: GatedConsumer's look at a fetched batch) are built with the
wheel where a C compiler is; without them their pure-Python twins serve, correct and slower.
Importing ordo logs which were found (logger ``ordo``: DEBUG when both are there, INFO naming a
missing one); ``accelerators()`` loads them and says which serve, and ``ordo --version`` prints it.
"""

from __future__ import annotations

import logging
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The repository's VERSION (linked here; a file of its own in a wheel), which every distribution,
# the chart and the images share; read from the file, not the installed metadata (a tenth of the
# time of ``import ordo``)
__version__ = (Path(__file__).parent / "VERSION").read_text().strip()

_ACCELERATORS = ("ordo._fastproduce", "ordo._fastscan")

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
    "accelerators": "ordo._accelerators",
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
            "MisplacedRecordError",
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
    "MisplacedRecordError",
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
    "accelerators",
]

if TYPE_CHECKING:  # what the names above are, for type checkers (loaded lazily below)
    from ._accelerators import accelerators as accelerators
    from .async_consumer import AsyncConsumer as AsyncConsumer
    from .async_consumer import Batch as Batch
    from .errors import CheckpointError as CheckpointError
    from .errors import ConfigError as ConfigError
    from .errors import ConsumerClosedError as ConsumerClosedError
    from .errors import DeliveryError as DeliveryError
    from .errors import MisplacedRecordError as MisplacedRecordError
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


def _log_accelerators() -> None:
    """One line at import: which C accelerators were built into this installation (found, not
    loaded: ``_fastscan`` would load confluent-kafka, which ``import ordo.api`` does not need)."""
    missing = [name for name in _ACCELERATORS if find_spec(name) is None]
    log = logging.getLogger(__name__)
    if missing:
        log.info(
            "ordo %s: C accelerator(s) %s not built: their pure-Python twins serve (correct, slower "
            "produce() and batch scans); install ordo-kafka where a C compiler and Python's headers "
            "are to have them (ordo --version says which serve)",
            __version__, ", ".join(missing),
        )  # fmt: skip
    else:
        log.debug("ordo %s: C accelerators %s found", __version__, ", ".join(_ACCELERATORS))


_log_accelerators()
