"""Fetches waiting for records, woken when a write to one of their partitions passes the proxy.

Kafka completes a waiting Fetch as soon as records arrive; Tansu polls its storage instead, so a
tailing reader saw a record ~115 ms after its write was acknowledged, three times over in an
expansion's fence (the fence, the acknowledgements, the new epoch). Every write reaches Tansu
through the proxy, so the proxy itself can tell a waiting fetch when to look again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

TopicPartition = tuple[str, int]


class Arrivals:
    def __init__(self) -> None:
        self._waiting: dict[TopicPartition, set[asyncio.Future[None]]] = {}

    @property
    def waiting(self) -> int:
        """How many partitions have fetches waiting for them."""
        return len(self._waiting)

    def written(self, partitions: Iterable[TopicPartition] | None) -> None:
        """Records may have arrived in ``partitions`` (None: anywhere, e.g. transaction markers
        that Tansu wrote to partitions the proxy did not see named)."""
        keys = list(self._waiting) if partitions is None else partitions
        for key in keys:
            for waiter in self._waiting.pop(key, ()):
                if not waiter.done():
                    waiter.set_result(None)

    async def wait(self, partitions: Iterable[TopicPartition], timeout: float) -> None:
        """Until a write to one of ``partitions`` passed, or ``timeout`` seconds."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(partitions)
        for key in keys:
            self._waiting.setdefault(key, set()).add(waiter)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(waiter), timeout)
        finally:
            for key in keys:
                waiting = self._waiting.get(key)
                if waiting is not None:
                    waiting.discard(waiter)
                    if not waiting:
                        del self._waiting[key]
