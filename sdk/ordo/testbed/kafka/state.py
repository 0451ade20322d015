"""Visible partition counts per topic: the only state the proxy must not lose."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

STATE_FILE = "kafka-proxy-state.json"


class TopicRegistry:
    """Every topic exists physically with ``max_partitions``; clients see only ``visible(topic)``.

    Saved to ``<state_dir>/kafka-proxy-state.json`` on each change when a state dir is given.
    """

    def __init__(self, max_partitions: int, state_dir: Path | None = None) -> None:
        self.max_partitions = max_partitions
        self._path = state_dir / STATE_FILE if state_dir is not None else None
        self._visible: dict[str, int] = {}
        self._lock = threading.Lock()
        if self._path is not None and self._path.exists():
            saved = json.loads(self._path.read_text())
            self._visible = {str(k): int(v) for k, v in saved.get("visible", {}).items()}

    def visible(self, topic: str) -> int | None:
        return self._visible.get(topic)

    def topics(self) -> dict[str, int]:
        with self._lock:
            return dict(self._visible)

    def set(self, topic: str, count: int) -> None:
        with self._lock:
            self._visible[topic] = count
            self._save()

    def add_if_absent(self, topic: str, count: int) -> int:
        with self._lock:
            current = self._visible.setdefault(topic, count)
            self._save()
            return current

    def forget(self, topic: str) -> None:
        with self._lock:
            if self._visible.pop(topic, None) is not None:
                self._save()

    def reconcile(self, physical: dict[str, int]) -> None:
        """Align with the topics the broker really has (after a restart of the proxy or broker).

        A topic known from the state file keeps its saved count; an unknown one (created behind
        the proxy's back) shows all its physical partitions; vanished topics are forgotten.
        """
        with self._lock:
            self._visible = {
                name: min(self._visible.get(name, count), count) for name, count in physical.items()
            }
            self._save()

    def _save(self) -> None:
        if self._path is None:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"max_partitions": self.max_partitions, "visible": self._visible}))
        os.replace(tmp, self._path)
