"""The proxy's own group coordinator at run time: the group state machine, the offset store, the
producer-epoch tracker, and the timer that expires sessions and rebalance timeouts."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from .fencing import ProducerEpochs
from .groups import GroupCoordinator
from .offsets import OffsetStore


class Coordinator:
    def __init__(
        self,
        state_dir: Path | None = None,
        *,
        min_session_timeout_ms: int = 1000,
        initial_rebalance_delay_ms: int = 0,
    ) -> None:
        self.offsets = OffsetStore(state_dir)
        self.groups = GroupCoordinator(
            min_session_timeout=min_session_timeout_ms / 1000,
            initial_rebalance_delay=initial_rebalance_delay_ms / 1000,
            on_generation=self.offsets.set_generation if state_dir is not None else None,
        )
        for group, generation in self.offsets.groups():
            self.groups.ensure(group, generation)
        self.producers = ProducerEpochs()
        self._wake = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None

    @staticmethod
    def now() -> float:
        return time.monotonic()

    def start(self) -> None:
        self._timer = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
        self.offsets.close()

    def changed(self) -> None:
        """Deadlines may have moved: let the timer recompute its next wake-up."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            deadline = self.groups.next_deadline()
            timeout = None if deadline is None else max(0.0, deadline - self.now())
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self.groups.tick(self.now())
