"""Optional persistence: the objects and the resourceVersion counter in one JSON file, written
atomically (tmp + rename) at most every ``interval`` seconds while something changed, and on stop."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from .cluster import Cluster

FILENAME = "kube-state.json"


class StateFile:
    def __init__(self, directory: Path, interval: float = 0.5):
        self.path = directory / FILENAME
        self.interval = interval
        self._dirty = asyncio.Event()

    def load(self, cluster: Cluster) -> bool:
        if not self.path.exists():
            return False
        cluster.restore(json.loads(self.path.read_text()))
        return True

    def save(self, cluster: Cluster) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cluster.store.snapshot(), separators=(",", ":")))
        os.replace(tmp, self.path)
        self._dirty.clear()

    def mark(self) -> None:
        self._dirty.set()

    async def run(self, cluster: Cluster) -> None:
        """Flush loop; cancel it and call :meth:`save` once more to stop."""
        while True:
            await self._dirty.wait()
            await asyncio.sleep(self.interval)  # coalesce bursts of writes into one file write
            self.save(cluster)
