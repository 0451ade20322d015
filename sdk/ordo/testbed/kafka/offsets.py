"""Committed consumer-group offsets, transactional offsets pending until their transaction ends,
and group generations; kept in memory and, with a state dir, in an append-only JSON-lines log.

The log is replayed and compacted when the store opens, so offsets survive a proxy restart.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

OFFSETS_FILE = "kafka-proxy-offsets.jsonl"

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Committed:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


class OffsetStore:
    def __init__(self, state_dir: Path | None = None) -> None:
        self._committed: dict[str, dict[TopicPartition, Committed]] = {}
        self._generations: dict[str, int] = {}
        # producer id -> group -> offsets staged by TxnOffsetCommit, applied by EndTxn(commit)
        self._pending: dict[int, dict[str, dict[TopicPartition, Committed]]] = {}
        self._path = state_dir / OFFSETS_FILE if state_dir is not None else None
        self._log: IO[str] | None = None
        if self._path is not None:
            self._load(self._path)

    # -- committed offsets -----------------------------------------------------------------------

    def commit(self, group: str, offsets: dict[TopicPartition, Committed]) -> None:
        if not offsets:
            return
        self._committed.setdefault(group, {}).update(offsets)
        self._append(
            {"g": group, "o": [[t, p, c.offset, c.leader_epoch, c.metadata] for (t, p), c in offsets.items()]}
        )

    def fetch(
        self, group: str, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, Committed]:
        """Committed offsets of ``partitions`` (None: all the group has); absent ones are missing."""
        stored = self._committed.get(group, {})
        if partitions is None:
            return dict(stored)
        return {tp: stored[tp] for tp in partitions if tp in stored}

    def groups(self) -> Iterator[tuple[str, int]]:
        """Groups with offsets or a saved generation, and that generation (0 if none)."""
        for group in {*self._committed, *self._generations}:
            yield group, self._generations.get(group, 0)

    def set_generation(self, group: str, generation: int) -> None:
        self._generations[group] = generation
        self._append({"g": group, "gen": generation})

    def delete_group(self, group: str) -> None:
        self._committed.pop(group, None)
        self._generations.pop(group, None)
        self._append({"g": group, "delete": True})

    def forget_topic(self, topic: str) -> None:
        for offsets in self._committed.values():
            for tp in [tp for tp in offsets if tp[0] == topic]:
                del offsets[tp]
        self._append({"forget_topic": topic})

    # -- transactional offsets -------------------------------------------------------------------

    def stage(self, producer_id: int, group: str, offsets: dict[TopicPartition, Committed]) -> None:
        self._pending.setdefault(producer_id, {}).setdefault(group, {}).update(offsets)

    def end_transaction(self, producer_id: int, commit: bool) -> None:
        staged = self._pending.pop(producer_id, {})
        if commit:
            for group, offsets in staged.items():
                self.commit(group, offsets)

    def unstable(self, group: str, tp: TopicPartition) -> bool:
        """An open transaction holds an offset for ``tp`` (OffsetFetch require_stable)."""
        return any(tp in groups.get(group, {}) for groups in self._pending.values())

    # -- persistence -----------------------------------------------------------------------------

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def _append(self, entry: dict[str, Any]) -> None:
        if self._log is not None:
            self._log.write(json.dumps(entry, separators=(",", ":")) + "\n")
            self._log.flush()

    def _load(self, path: Path) -> None:
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    self._replay(json.loads(line))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("w") as out:
            self._log = out
            for group, offsets in self._committed.items():
                self._append(
                    {
                        "g": group,
                        "o": [[t, p, c.offset, c.leader_epoch, c.metadata] for (t, p), c in offsets.items()],
                    }
                )
            for group, generation in self._generations.items():
                self._append({"g": group, "gen": generation})
        os.replace(tmp, path)
        self._log = path.open("a")

    def _replay(self, entry: dict[str, Any]) -> None:
        group = entry.get("g")
        if "forget_topic" in entry:
            for offsets in self._committed.values():
                for tp in [tp for tp in offsets if tp[0] == entry["forget_topic"]]:
                    del offsets[tp]
        elif not isinstance(group, str):
            return
        elif entry.get("delete"):
            self._committed.pop(group, None)
            self._generations.pop(group, None)
        elif "gen" in entry:
            self._generations[group] = int(entry["gen"])
        else:
            offsets = self._committed.setdefault(group, {})
            for topic, partition, offset, epoch, metadata in entry.get("o", []):
                offsets[(str(topic), int(partition))] = Committed(int(offset), int(epoch), metadata)
