"""The proxy's waiting fetches: woken by a write to one of their partitions, or by their timeout."""

from __future__ import annotations

import asyncio

from ordo.testbed.kafka.arrivals import Arrivals


def test_a_write_wakes_only_the_fetches_waiting_for_its_partition() -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        arrivals = Arrivals()
        mine = asyncio.create_task(arrivals.wait([("t", 0), ("t", 1)], timeout=30))
        other = asyncio.create_task(arrivals.wait([("t", 2)], timeout=30))
        await asyncio.sleep(0)  # both registered
        arrivals.written([("t", 1)])
        await asyncio.wait_for(mine, 5)
        still_waiting = not other.done()
        arrivals.written(None)  # markers: every waiting fetch looks again
        await asyncio.wait_for(other, 5)
        return mine.done(), still_waiting, arrivals.waiting == 0

    assert asyncio.run(scenario()) == (True, True, True)


def test_a_fetch_nobody_writes_for_waits_its_timeout_and_leaves_nothing_behind() -> None:
    async def scenario() -> tuple[float, bool]:
        arrivals = Arrivals()
        loop = asyncio.get_running_loop()
        started = loop.time()
        await arrivals.wait([("t", 0)], timeout=0.05)
        return loop.time() - started, arrivals.waiting == 0

    waited, clean = asyncio.run(scenario())
    assert waited >= 0.05 and clean
