"""When records became readable (read_committed), partition by partition, as one independent
reader saw them, and the longest wait around a kill: what the replicated chaos run measures stalls
with (a stall is the longest gap between records seen, from the kill until records flow again)."""

from __future__ import annotations

import bisect
import json
import threading
import time
from collections import defaultdict
from collections.abc import Sequence

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from ordo.client_config import drain, logged

__all__ = ["Arrivals", "longest_gap"]


def longest_gap(times: Sequence[int], since_ns: int, after_ns: int) -> float | None:
    """The longest wait, in seconds, from ``since_ns`` or an event to the next event, up to the
    first event past ``after_ns`` (``times``: sorted monotonic ns); None while none is past it."""
    last = bisect.bisect_right(times, after_ns)
    if last == len(times):
        return None
    previous, longest = since_ns, 0
    for at in times[bisect.bisect_right(times, since_ns) : last + 1]:
        longest, previous = max(longest, at - previous), at
    return longest / 1e9


class Arrivals:
    """Tails ``topics`` (new partitions too) and ``checkpoint_topic`` from their beginning in a
    thread of its own. Checkpoint records are keyed ``<namespace>/<group>/<source partition>``."""

    def __init__(self, bootstrap: str, topics: list[str], checkpoint_topic: str) -> None:
        self._topics = [*topics, checkpoint_topic]
        self._checkpoint_topic = checkpoint_topic
        self._consumer = Consumer(
            logged(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": "chaos-arrivals",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                }
            )
        )
        self._lock = threading.Lock()
        self._records: dict[tuple[str, int], list[int]] = defaultdict(list)  # monotonic ns
        self._commits: dict[int, list[int]] = defaultdict(list)  # source partition -> monotonic ns
        self._assigned: set[tuple[str, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-arrivals", daemon=True)

    def start(self) -> Arrivals:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        drain(self._consumer)
        self._consumer.close()

    def partitions_written(self, topic: str) -> list[int]:
        """The partitions of ``topic`` that a record was read from so far."""
        with self._lock:
            return sorted(p for (t, p), times in self._records.items() if t == topic and times)

    def sources_committed(self) -> list[int]:
        """The source partitions that a committed unit was read of so far."""
        with self._lock:
            return sorted(p for p, times in self._commits.items() if times)

    def record_gap(self, topic: str, partition: int, since_ns: int, after_ns: int) -> float | None:
        """``longest_gap`` between the partition's records becoming readable."""
        with self._lock:
            return longest_gap(self._records.get((topic, partition), []), since_ns, after_ns)

    def commit_gap(self, source_partition: int, since_ns: int, after_ns: int) -> float | None:
        """``longest_gap`` between the source partition's committed units (checkpoints)."""
        with self._lock:
            return longest_gap(self._commits.get(source_partition, []), since_ns, after_ns)

    def _run(self) -> None:
        next_scan = 0.0
        while not self._stop.is_set():
            if time.monotonic() >= next_scan:  # new partitions (an expansion) are read from the start
                self._assign_new()
                next_scan = time.monotonic() + 1.0
            messages = self._consumer.consume(1000, 0.2)
            now = time.monotonic_ns()
            with self._lock:
                for message in messages:
                    if message.error() is not None:
                        continue
                    topic = message.topic() or ""
                    if topic != self._checkpoint_topic:
                        self._records[(topic, message.partition() or 0)].append(now)
                        continue
                    source = (message.key() or b"").decode().rsplit("/", 1)[-1]
                    # a new owner's takeover record commits no unit
                    if source.isdigit() and not json.loads(message.value() or b"{}").get("takeover"):
                        self._commits[int(source)].append(now)

    def _assign_new(self) -> None:
        try:
            metadata = self._consumer.list_topics(timeout=5).topics
        except Exception:  # a broker down at the moment: the next scan asks again
            return
        new = [
            TopicPartition(topic, p, OFFSET_BEGINNING)
            for topic in self._topics
            if topic in metadata
            for p in metadata[topic].partitions
            if (topic, p) not in self._assigned
        ]
        if new:
            self._consumer.incremental_assign(new)
            self._assigned.update((tp.topic, tp.partition) for tp in new)
