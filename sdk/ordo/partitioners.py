"""Partitioners: pure functions from a record to a partition, for a given partition count.

`murmur2` is bit-for-bit the Java client's ``Utils.murmur2`` followed by ``toPositive(h) % n``,
which librdkafka's ``murmur2_random`` partitioner also implements, so Java, librdkafka and ordo
producers agree on where a key goes. ordo picks partitions itself (from the epoch's partition
count) instead of letting librdkafka do it from metadata that changes at an arbitrary moment.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Final, Literal, Protocol

__all__ = [
    "PARTITIONERS",
    "ExplicitPartitioner",
    "Murmur2Partitioner",
    "Partitioner",
    "PartitionerName",
    "RoundRobinPartitioner",
    "make_partitioner",
    "murmur2",
    "murmur2_partition",
    "to_positive",
]

PartitionerName = Literal["murmur2", "round_robin", "explicit"]
PARTITIONERS: Final[tuple[PartitionerName, ...]] = ("murmur2", "round_robin", "explicit")

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_MASK32: Final = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """The Java client's ``Utils.murmur2``: a signed 32-bit MurmurHash2 of ``data``."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    tail = length & ~3
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    rest = length & 3
    if rest:
        if rest == 3:
            h ^= data[tail + 2] << 16
        if rest >= 2:
            h ^= data[tail + 1] << 8
        h ^= data[tail]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(h: int) -> int:
    """The Java client's ``Utils.toPositive``: clears the sign bit (not ``abs``)."""
    return h & 0x7FFFFFFF


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The partition the Java default partitioner gives a non-null ``key``."""
    return to_positive(murmur2(key)) % partitions


class Partitioner(Protocol):
    """Chooses a partition for a record given the topic's partition count."""

    def partition(self, key: bytes | None, partitions: int, explicit: int | None = None) -> int: ...


def _check_count(partitions: int) -> None:
    if partitions < 1:
        raise ValueError(f"partition count must be at least 1, got {partitions}")


class Murmur2Partitioner:
    """Java-compatible key hashing; keyless records go round-robin (they have no order to keep).

    Hashing in Python costs microseconds per record, so hashes of recently seen keys are cached:
    real key spaces are skewed and a bounded dict lookup is far cheaper than the hash.
    """

    def __init__(self, cache_size: int = 65_536) -> None:
        self.cache: dict[bytes, int] = {}
        """key → non-negative murmur2 hash (readable by hot paths that inline the lookup)."""
        self._cache_size = cache_size
        self._keyless = RoundRobinPartitioner()

    def partition(self, key: bytes | None, partitions: int, explicit: int | None = None) -> int:
        _check_count(partitions)
        if explicit is not None:
            return ExplicitPartitioner.validate(explicit, partitions)
        if key is None:
            return self._keyless.partition(None, partitions)
        h = self.cache.get(key)
        if h is None:
            h = to_positive(murmur2(key))
            if len(self.cache) >= self._cache_size:
                self.cache.clear()  # cheap reset; a hot key set refills it at once
            self.cache[key] = h
        return h % partitions


class RoundRobinPartitioner:
    """KIP-369: every available partition in turn, evenly, keys ignored for placement.

    One counter per partitioner, advanced exactly once per record, so no partition is skipped or
    doubled (the Java RoundRobinPartitioner's KAFKA-9965 skew came from advancing twice per record).
    Unavailable partitions are stepped over by walking the available ones, which spreads their share
    evenly over the rest; a grown count is used from the very next record.
    """

    def __init__(self) -> None:
        self._next = 0
        self._lock = threading.Lock()

    def partition(
        self,
        key: bytes | None,
        partitions: int,
        explicit: int | None = None,
        available: Sequence[int] | None = None,
    ) -> int:
        _check_count(partitions)
        if explicit is not None:
            return ExplicitPartitioner.validate(explicit, partitions)
        with self._lock:
            n = self._next
            self._next = n + 1
        if available is None:
            return n % partitions
        usable = [p for p in available if 0 <= p < partitions]
        if not usable:  # none known to be up: fall back to all, the client will retry
            return n % partitions
        return usable[n % len(usable)]


class ExplicitPartitioner:
    """The caller names the partition; it must exist in the current epoch."""

    @staticmethod
    def validate(partition: int, partitions: int) -> int:
        if not 0 <= partition < partitions:
            raise ValueError(f"partition {partition} does not exist: the topic has {partitions} partitions")
        return partition

    def partition(self, key: bytes | None, partitions: int, explicit: int | None = None) -> int:
        _check_count(partitions)
        if explicit is None:
            raise ValueError("the explicit partitioner needs a partition for every record")
        return self.validate(explicit, partitions)


_FACTORIES: Final[dict[str, Callable[[], Partitioner]]] = {
    "murmur2": Murmur2Partitioner,
    "round_robin": RoundRobinPartitioner,
    "explicit": ExplicitPartitioner,
}


def make_partitioner(name: str) -> Partitioner:
    """A new partitioner by name; raises ValueError naming the valid choices."""
    try:
        return _FACTORIES[name]()
    except KeyError:
        raise ValueError(f"unknown partitioner {name!r}: choose one of {', '.join(PARTITIONERS)}") from None
