"""Fetched batches passed from the fetcher thread to the consumer's lock holder. Pure, no Kafka.

The fetcher puts each batch ``consume()`` returned without taking the consumer's lock; whoever
holds the lock next (usually the user's ``poll()``, which needs the records) takes them and does
the per-record bookkeeping. The fetcher's Python work per batch is then one append: with the
bookkeeping on the fetcher, the poller waited for it, and the fetcher needed the GIL once per
step (``consume``, the lock, ``_ingest``), each a wait of up to the switch interval while the
user's workers run Python (docs/performance.md).
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

__all__ = ["Handoff"]

T = TypeVar("T")


class Handoff(Generic[T]):
    """``put`` from one thread, ``take`` from one thread at a time (the holder of a lock). Both
    counters have a single writer each, so ``len`` needs no lock (it may lag by one batch)."""

    __slots__ = ("_batches", "_put", "_taken")

    def __init__(self) -> None:
        self._batches: deque[list[T]] = deque()
        self._put = 0  # records put, written by the putting thread only
        self._taken = 0  # records taken, written by the lock holder only

    def put(self, batch: list[T]) -> None:
        self._put += len(batch)  # counted first: a concurrent len() never sees a negative count
        self._batches.append(batch)  # atomic

    def take(self) -> list[list[T]]:
        """Every batch put so far, in order."""
        batches = self._batches
        out: list[list[T]] = []
        while batches:
            batch = batches.popleft()
            self._taken += len(batch)
            out.append(batch)
        return out

    def __len__(self) -> int:
        """Records put and not taken."""
        return max(0, self._put - self._taken)

    def __bool__(self) -> bool:
        return bool(self._batches)
