"""Partition choice per record on produce()'s Python path (records with a callback or headers, or
any record of a build without the C module): ordo's murmur2 partitioner, which caches hot keys'
hashes, vs hashing every record with the pure-Python murmur2 (what that path would otherwise do
without the C module). With the C module the hash itself is in C and costs about a cache hit, so
the cache is what keeps a build without it fast; the C path (``_fastproduce.c``) hashes in C
either way. The two run in turn, the side that goes first alternating per round."""

from __future__ import annotations

import time
from collections.abc import Callable

from ordo.partitioners import Murmur2Partitioner, murmur2_python, to_positive

from ._result import Result

ROUNDS = 5
Choose = Callable[[bytes, int], int]


def _rate(call: Choose, keys: list[bytes], partitions: int) -> float:
    start = time.perf_counter()
    for key in keys:
        call(key, partitions)
    return len(keys) / (time.perf_counter() - start)


def _python_partition(key: bytes, partitions: int) -> int:
    return to_positive(murmur2_python(key)) % partitions


def run() -> list[Result]:
    keys = [f"customer-{i % 1000}".encode() for i in range(200_000)]
    sides: dict[str, Choose] = {"cached": Murmur2Partitioner().partition, "plain": _python_partition}
    rates: dict[str, list[float]] = {name: [] for name in sides}
    for round_ in range(ROUNDS):
        for name in sides if round_ % 2 == 0 else reversed(sides):
            rates[name].append(_rate(sides[name], keys, 12))
    return [
        Result.paired(
            "murmur2 partition choice, 1k hot keys, vs the pure-Python hash per record",
            rates["cached"],
            rates["plain"],
            "rec/s",
            ">= 1",
        )
    ]
