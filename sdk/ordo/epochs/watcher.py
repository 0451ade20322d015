"""ProgressWatcher: a consumer's gate checks the group's progress off its poll thread.

A thread of the consumer's own asks, in one round, the group's committed offsets of every
partition the consumer's held gates wait for (one OffsetFetch) and, for those whose committed
offset falls short, their log starts (one ListOffsets per leader), and keeps the answer as
``snapshot`` for the poll thread to evaluate its gates against (``ordo.epochs.progress``). Before,
the poll thread asked per held partition, committed offset then watermarks, one partition at a
time: with the 1,024 new partitions of a 1,024 -> 2,048 expansion held, a ``consume()`` took
seconds (docs/performance.md).

Rounds start ``min_backoff`` apart while the answers move (or at once when a partition is newly
wanted) and back off to ``max_backoff`` while they do not.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from .._clients import drain
from ..topic_partition import TP
from .progress import group_progress, learned, needs_log_start

__all__ = ["REQUEST_TIMEOUT", "ProgressWatcher"]

_log = logging.getLogger(__name__)
REQUEST_TIMEOUT = 5.0
"""Seconds a round waits for the broker; an unanswered round is tried again after the backoff."""


class ProgressWatcher:
    """Fetches the group's progress of the partitions ``want`` names; ``snapshot`` is what the
    answers said so far (replaced, never changed in place: partition -> offset below which the
    group is done; progress only grows).
    ``config``: a consumer config with the group's ``group.id``. The thread starts with the first
    partition wanted; ``on_snapshot`` is called on it after a snapshot that moved."""

    def __init__(
        self,
        config: Mapping[str, Any],
        min_backoff: float,
        max_backoff: float,
        on_snapshot: Callable[[], None] | None = None,
    ) -> None:
        self._config = {**config, "enable.auto.commit": False}
        self._min, self._max = min_backoff, max_backoff
        self._on_snapshot = on_snapshot
        self.snapshot: Mapping[TP, int] = {}
        self.rounds = 0
        """Rounds answered (a round: one OffsetFetch, and one ListOffsets per leader at most)."""
        self._wanted: dict[TP, int] = {}
        self._stale: set[str] = set()  # topics whose metadata the reader must ask again
        self._cond = threading.Condition()
        self._interval = min_backoff
        self._next_at = 0.0  # monotonic: when the next round may start
        self._asking = False
        self._closing = False
        self._thread: threading.Thread | None = None

    def want(self, wanted: Mapping[TP, int]) -> None:
        """Ask about these partitions from now on (partition -> the threshold waited for). A
        partition not wanted before is asked about at once."""
        with self._cond:
            new = not wanted.keys() <= self._wanted.keys()
            self._wanted = dict(wanted)
            if new:
                self._interval, self._next_at = self._min, 0.0
                self._cond.notify()
            if self._thread is None and self._wanted and not self._closing:
                self._thread = threading.Thread(target=self._run, name="ordo-gate-progress", daemon=True)
                self._thread.start()

    def stale(self, topic: str) -> None:
        """``topic`` got partitions: the reader's metadata is its own and would not know them
        (Local: Unknown partition) until librdkafka's 5-minute refresh."""
        with self._cond:
            self._stale.add(topic)

    def due_in(self) -> float:
        """Seconds until a newer snapshot may come: 0 while a round is on, infinity with nothing
        wanted."""
        if self._asking:
            return 0.0
        if not self._wanted:
            return math.inf
        return max(0.0, self._next_at - time.monotonic())

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(REQUEST_TIMEOUT * 3)

    def _run(self) -> None:
        reader: Consumer | None = None
        try:
            while True:
                with self._cond:
                    while not self._closing and (not self._wanted or time.monotonic() < self._next_at):
                        self._cond.wait(self._next_at - time.monotonic() if self._wanted else None)
                    if self._closing:
                        return
                    wanted, stale = self._wanted, self._stale
                    self._stale, self._asking = set(), True
                if reader is None:
                    reader = Consumer(self._config)
                progress, unanswered = self._ask(reader, wanted, stale)
                with self._cond:
                    self._asking = False
                    self._stale |= unanswered
                    known = learned(self.snapshot, progress) if progress is not None else None
                    moved = known is not None
                    if known is not None:
                        self.snapshot = known
                    elif progress is None:
                        self._stale |= {topic for topic, _ in wanted} | stale
                    self._interval = self._min if moved else min(self._interval * 2, self._max)
                    self._next_at = time.monotonic() + self._interval
                    self.rounds += 1
                    if _log.isEnabledFor(logging.DEBUG):
                        _log.debug("round %d: asked %s, answered %s", self.rounds, dict(wanted), progress)
                if moved and self._on_snapshot is not None:
                    self._on_snapshot()
        except Exception:  # the gates stay closed: said, not silent
            _log.exception("the gate's progress watcher failed: held gates open by own progress only")
        finally:
            if reader is not None:
                drain(reader)
                reader.close()

    def _ask(
        self, reader: Consumer, wanted: Mapping[TP, int], stale: set[str]
    ) -> tuple[dict[TP, int] | None, set[str]]:
        """One round: the group's progress of ``wanted``, or None when the broker could not say
        (a leader move, a coordinator failover): tried again after the backoff. With it, the
        topics of partitions answered with an error (an unknown partition: the reader's metadata
        is older than the topic's growth), whose metadata the next round asks again."""
        try:
            for topic in stale:
                reader.list_topics(topic, timeout=REQUEST_TIMEOUT)
            asked = [TopicPartition(topic, partition) for topic, partition in wanted]
            answers = reader.committed(asked, timeout=REQUEST_TIMEOUT)
            committed = {(tp.topic, tp.partition): tp.offset for tp in answers if tp.error is None}
            unanswered = {tp.topic for tp in answers if tp.error is not None}
            short = needs_log_start(wanted, committed)
            starts: dict[TP, int] = {}
            if short:
                # a timestamp of OFFSET_BEGINNING asks ListOffsets for the log start, batched per leader
                earliest = [TopicPartition(topic, partition, OFFSET_BEGINNING) for topic, partition in short]
                found = reader.offsets_for_times(earliest, timeout=REQUEST_TIMEOUT)
                starts = {(tp.topic, tp.partition): tp.offset for tp in found if tp.error is None}
                unanswered |= {tp.topic for tp in found if tp.error is not None}
            return group_progress(committed, starts), unanswered
        except KafkaException as error:
            _log.warning("gates: the group's progress of %d partitions unknown for now: %s", len(wanted),
                         error)  # fmt: skip
            return None, set()
        finally:
            drain(reader)  # its log lines: the reader has no assignment and is never polled otherwise
