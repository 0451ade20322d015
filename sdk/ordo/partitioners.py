"""Partitioners: pure functions from a record to a partition, for a given partition count.

`murmur2` is bit-for-bit the Java client's ``Utils.murmur2`` followed by ``toPositive(h) % n``,
which librdkafka's ``murmur2_random`` partitioner also implements, so Java, librdkafka and ordo
producers agree on where a key goes. ordo picks partitions itself (from the epoch's partition
count) instead of letting librdkafka do it from metadata that changes at an arbitrary moment.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from typing import Final, Literal, Protocol, cast

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
    "murmur2_partitions",
    "murmur2_partitions_python",
    "murmur2_python",
    "to_positive",
    "usable_partitions",
]

PartitionerName = Literal["murmur2", "round_robin", "explicit"]
PARTITIONERS: Final[tuple[PartitionerName, ...]] = ("murmur2", "round_robin", "explicit")

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_MASK32: Final = 0xFFFFFFFF


def murmur2_python(data: bytes) -> int:
    """The Java client's ``Utils.murmur2``: a signed 32-bit MurmurHash2 of ``data``. The twin of
    the C ``murmur2`` (ordo/_fastproduce.c), which serves as ``murmur2`` when it was built."""
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


murmur2: Callable[[bytes], int]
"""The Java client's ``Utils.murmur2``: a signed 32-bit MurmurHash2 of ``data`` (in C when built:
20-30 times faster than the Python twin)."""
try:
    from ._fastproduce import murmur2
except ImportError:  # built without a C compiler, or a free-threaded Python
    murmur2 = murmur2_python


def to_positive(h: int) -> int:
    """The Java client's ``Utils.toPositive``: clears the sign bit (not ``abs``)."""
    return h & 0x7FFFFFFF


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The partition the Java default partitioner gives a non-null ``key``."""
    return to_positive(murmur2(key)) % partitions


def murmur2_partitions_python(keys: Sequence[bytes | str | None], partitions: int) -> frozenset[int]:
    """The partitions the Java default partitioner puts records with ``keys`` in: every one when a
    key is None (a keyless record may go to any). The twin of the C ``murmur2_partitions``
    (ordo/_fastproduce.c), which serves as ``murmur2_partitions`` when it was built."""
    _check_count(partitions)
    if None in keys:
        return frozenset(range(partitions))
    chosen = set()
    for key in cast("Sequence[object]", keys):
        if not isinstance(key, bytes | str):
            raise TypeError(f"keys must be bytes, str or None, got {type(key).__name__}")
        chosen.add(murmur2_partition(key.encode() if isinstance(key, str) else key, partitions))
    return frozenset(chosen)


murmur2_partitions: Callable[[Sequence[bytes | str | None], int], frozenset[int]]
"""What a pre-registered transaction declares for these keys (OrderedProducer.partitions_of); in
C when built: a mark per partition, not a Python int and a set insertion per key."""
try:
    from ._fastproduce import murmur2_partitions
except ImportError:  # as murmur2 above
    murmur2_partitions = murmur2_partitions_python


class Partitioner(Protocol):
    """Chooses a partition for a record given the topic's partition count."""

    def partition(self, key: bytes | None, partitions: int, explicit: int | None = None) -> int: ...


def _check_count(partitions: int) -> None:
    if partitions < 1:
        raise ValueError(f"partition count must be at least 1, got {partitions}")


class Murmur2Partitioner:
    """Java-compatible key hashing; keyless records go round-robin (they have no order to keep).

    Hashes of recently seen keys are cached for produce()'s Python path: a bounded dict lookup is
    cheaper than a call of the hash (its C path hashes every key itself, ordo/_fastproduce.c).
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

    A rotation over the usable partitions, advanced exactly once per call, so no partition is
    skipped or doubled (the Java RoundRobinPartitioner's KAFKA-9965 skew came from advancing twice
    per record); callers must call it once per record. ``available`` limits the rotation to those
    partitions, ``unavailable`` removes partitions whose leader is unknown; their share goes evenly
    to the rest. When the usable set changes (a grown count, a partition lost or back), the rotation
    continues after the last partition chosen, so the next record already uses the new set. With
    nothing usable it falls back to all partitions (the client then waits for a leader).
    """

    def __init__(self) -> None:
        self._last = -1
        self._index = -1
        self._usable: tuple[int, ...] = ()
        self._shape: tuple[int, object, object] | None = None
        self._lock = threading.Lock()

    def partition(
        self,
        key: bytes | None,
        partitions: int,
        explicit: int | None = None,
        available: Sequence[int] | AbstractSet[int] | None = None,
        unavailable: AbstractSet[int] | None = None,
    ) -> int:
        _check_count(partitions)
        if explicit is not None:
            return ExplicitPartitioner.validate(explicit, partitions)
        with self._lock:
            shape = (partitions, available, unavailable)
            if shape != self._shape:  # identical arguments compare by identity: cheap per record
                self._shape = shape
                self._usable = usable_partitions(partitions, available, unavailable)
                self._index = bisect_right(self._usable, self._last) - 1
            usable = self._usable
            self._index = index = (self._index + 1) % len(usable)
            self._last = chosen = usable[index]
            return chosen


def usable_partitions(
    partitions: int,
    available: Sequence[int] | AbstractSet[int] | None = None,
    unavailable: AbstractSet[int] | None = None,
) -> tuple[int, ...]:
    """The partitions a round-robin rotation visits, in order; all of them when none is usable."""
    candidates = (
        range(partitions) if available is None else sorted({p for p in available if 0 <= p < partitions})
    )
    usable = tuple(p for p in candidates if not unavailable or p not in unavailable)
    return usable or tuple(range(partitions))


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
