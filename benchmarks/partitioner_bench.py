"""Partition choice per record on produce()'s Python path (records with a callback or headers, or
any record of a build without the C module): ordo's murmur2 partitioner, which caches hot keys'
hashes, vs hashing every record with the pure-Python murmur2 (what that path would otherwise do
without the C module). With the C module the hash itself is in C and costs about a cache hit, so
the cache is what keeps a build without it fast; the C path (``_fastproduce.c``) hashes in C
either way."""

from __future__ import annotations

import time

from ordo.partitioners import Murmur2Partitioner, murmur2_python, to_positive

from ._result import Result


def _rate(fn: object, keys: list[bytes], partitions: int) -> float:
    call = fn  # bound once: the loop measures the partitioner, not attribute lookups
    start = time.perf_counter()
    for key in keys:
        call(key, partitions)  # type: ignore[operator]
    return len(keys) / (time.perf_counter() - start)


def _python_partition(key: bytes, partitions: int) -> int:
    return to_positive(murmur2_python(key)) % partitions


def run() -> list[Result]:
    keys = [f"customer-{i % 1000}".encode() for i in range(200_000)]
    cached = Murmur2Partitioner().partition
    best_cached = max(_rate(cached, keys, 12) for _ in range(3))
    best_plain = max(_rate(_python_partition, keys, 12) for _ in range(3))
    return [
        Result(
            "murmur2 partition choice, 1k hot keys, vs the pure-Python hash per record",
            best_cached,
            best_plain,
            "rec/s",
            ">= 1",
        )
    ]
