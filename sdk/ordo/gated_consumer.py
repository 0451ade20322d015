"""GatedConsumer: a confluent-kafka Consumer that never hands out a key's records out of order
across a partition expansion (KIP-253; docs/architecture.md).

A record of a new epoch is delivered only once every partition its key could have been in before
is consumed by the group up to where that epoch began (its threshold). Until then its partition
is paused and the records fetched for it are kept, while other partitions flow; it polls the group's
committed offsets of the partitions it waits for, with backoff, and resumes when the gate opens.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import compress
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from . import metrics
from ._batch_scan import scan
from ._clients import assign_known, consumer_side, drain, fast_refill, logged
from .epochs import EpochHistory, Gate, GateKeeper, stamped_epoch
from .epochs.log import DEFAULT_EPOCH_TOPIC, EpochLog
from .errors import ConfigError
from .group_protocol import group_protocol

__all__ = ["GatedConsumer"]

_log = logging.getLogger(__name__)
TP = tuple[str, int]
_error_of, _headers_of = Message.error, Message.headers
_partition_of, _topic_of = Message.partition, Message.topic
_SKIP_CHECK_INTERVAL = 0.1  # seconds between looks for offsets passed without a record
# A partition no epoch covers is normal for a moment (ordo's producers write to a new partition
# once its epoch is published, and this consumer's epoch log may lag theirs); held this long, it
# was added outside ordo. Said again at this interval while it lasts.
UNKNOWN_PARTITION_GRACE = 10.0


@dataclass
class _Held:
    """A paused partition waiting for its gate, with the records fetched for it meanwhile (the
    first one is the record whose gate is closed). Keeping them avoids a seek and a refetch,
    which costs librdkafka most of a second."""

    gate: Gate
    since: float
    next_check: float
    backoff: float
    buffer: list[Message]
    stamped: int | None = None
    """Set when the first record carries an epoch the epoch log has not shown yet."""
    warned: float = 0.0
    """When the partition was last reported as covered by no epoch (0: never)."""


class GatedConsumer:
    """Consume ``topics`` with the ordering gate. Offsets of records handed out are stored when
    the next ``poll``/``consume`` is called (the record counts as processed then) and committed by
    librdkafka's auto-commit, or by ``commit()``. ``assignment`` assigns partitions by hand instead
    of subscribing (the group's committed offsets still open gates)."""

    def __init__(
        self,
        config: Mapping[str, Any],
        topics: Iterable[str],
        *,
        epoch_topic: str = DEFAULT_EPOCH_TOPIC,
        epoch_log: EpochLog | None = None,
        min_backoff: float = 0.02,
        max_backoff: float = 0.25,
        on_assign: Callable[[Consumer, list[TopicPartition]], None] | None = None,
        on_revoke: Callable[[Consumer, list[TopicPartition]], None] | None = None,
        assignment: Iterable[TopicPartition] | None = None,
    ) -> None:
        if "group.id" not in config:
            raise ConfigError("GatedConsumer needs a group.id: gates read the group's committed offsets")
        self.topics = list(topics)
        if not self.topics:
            raise ConfigError("GatedConsumer needs at least one topic")
        group_protocol(config)  # refuses classic settings in a KIP-848 member, saying which
        self._min_backoff, self._max_backoff = min_backoff, max_backoff
        self._consumer = Consumer(fast_refill(logged({**config, "enable.auto.offset.store": False})))
        # With auto-commit, a gate of another member waits for this one's commit: passing a
        # threshold commits at once instead of up to auto.commit.interval.ms (5 s) later. With
        # auto-commit off the application's commits open gates, and commit when it chooses.
        self._commit_on_threshold = str(config.get("enable.auto.commit", True)).lower() not in ("false", "0")
        # Progress queries go over a connection of their own: on the consumer's, they would
        # queue behind its fetch long-poll (fetch.wait.max.ms) and the gate would open late.
        self._progress_config = logged(consumer_side({k: v for k, v in config.items() if not callable(v)}))
        self._progress_reader: Consumer | None = None
        self._reader_stale: set[str] = set()  # topics to ask the reader's metadata of again
        client = {k: v for k, v in config.items() if k not in ("group.id", "group.instance.id")}
        self._owns_log = epoch_log is None
        self._log = epoch_log or EpochLog(client, epoch_topic)
        self._keepers: dict[str, GateKeeper | None] = {}
        self._cache_lock = threading.Lock()
        self._history_version = 0
        self._open_until: dict[TP, float] = {}
        self._held: dict[TP, _Held] = {}
        self._ready: deque[Message] = deque()  # admitted from a buffer, not yet handed out
        self._processed: dict[TP, int] = {}  # next offset to process, per partition we processed
        self._revoked_now: set[TP] = set()  # revoked during this consume()'s fetch
        self._pending_store: dict[TP, int] = {}  # handed out by the last consume, stored by the next
        self._next_skip_check = 0.0
        self._user_assign, self._user_revoke = on_assign, on_revoke
        self.gate_waits: list[float] = []  # seconds each closed gate held its partition
        # Every pause, resume, assignment change, offset stored and batch fetched, at DEBUG: what
        # it takes to place a record that was never handed out (ORDO_SCENARIO_DEBUG turns it on).
        self._trace = _log.isEnabledFor(logging.DEBUG)
        # Set by the epoch log's thread when a subscribed topic got partitions: the next consume()
        # asks for metadata, so the group assigns them now (a classic group learns of new
        # partitions only from librdkafka's periodic refresh, every 5 minutes by default).
        self._grown = threading.Event()
        self._subscribed = assignment is None
        assigned = list(assignment) if assignment is not None else []
        named = set(self.topics) | {tp.topic for tp in assigned}
        self._only_topic: str | None = self.topics[0] if len(named) == 1 else None
        self._active_seen: dict[str, int] = {}
        self._unsubscribe = self._log.subscribe(self._on_history)
        if not self._log.catch_up(10.0):
            # judging records by a partial history could hand a moved key's records out of order
            self.close()
            raise ConfigError(
                f"cannot read the epoch log {epoch_topic!r} at {config.get('bootstrap.servers')}: "
                f"{self._log.describe()}; the ordo operator creates it"
            )
        if assignment is not None:  # manual assignment: no group membership; commits still count
            assign_known(self._consumer, assigned)
        else:
            self._consumer.subscribe(
                self.topics, on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
            )

    # -- consuming ---------------------------------------------------------------------------

    def poll(self, timeout: float = 1.0) -> Message | None:
        """The next admissible record (or an error event), or None after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            batch = self.consume(1, max(0.0, deadline - time.monotonic()))
            if batch or time.monotonic() >= deadline:
                return batch[0] if batch else None

    def consume(self, num_messages: int = 1, timeout: float = 1.0) -> list[Message]:
        """Up to ``num_messages`` admissible records."""
        if self._grown.is_set():
            self._see_new_partitions()
        self._store_processed()
        self._check_held()
        admitted: list[Message] = []
        handed: dict[TP, int] = {}  # per partition, the last offset handed out by this call
        while self._ready and len(admitted) < num_messages:
            message = self._ready.popleft()
            admitted.append(message)
            if message.error() is None:
                where, offset = _position(message)
                handed[where] = offset
        if len(admitted) < num_messages:
            wait = 0.0 if admitted else min(timeout, self._next_check_in()) if self._held else timeout
            self._revoked_now = set()
            fetched = self._consumer.consume(num_messages - len(admitted), wait)  # may revoke
            if self._revoked_now:
                # records taken from the buffer above belong to partitions gone meanwhile: their
                # offsets could no longer be committed, so the next owner would process them too
                gone = self._revoked_now
                admitted = [m for m in admitted if m.error() is not None or _position(m)[0] not in gone]
                handed = {tp: offset for tp, offset in handed.items() if tp not in gone}
            if self._trace and fetched:
                _log.debug("fetched %s", _spans(fetched))
            admitted += self._admit_all(fetched, handed)
        self._pending_store = handed
        return admitted

    def _admit_all(self, messages: list[Message], handed: dict[TP, int]) -> list[Message]:
        """The admissible messages, in order; the rest wait in their partition's buffer.
        ``handed``: gets the last offset admitted per partition.

        The consumer's hot path. A batch with no record stamped with an epoch this consumer's
        log has not shown yet is judged per partition from its last record: offsets rise, so if
        the last one is below where the open gate ends, every one is. When every partition of a
        batch passes (the usual case), the batch is handed out as it came; the per-record work
        is one pass in C over the records' fields (``_batch_scan``; a few passes through
        confluent-kafka's methods where that is not built, or for several topics)."""
        if not messages:
            return messages
        topic = self._only_topic
        lasts: dict[Any, Message]
        if topic is not None:
            error, headers, lasts = scan(messages)
            if error or (headers and self._ahead_in(messages)):
                return self._admit_runs(messages, handed)
        else:
            if any(map(_error_of, messages)) or self._ahead_in(messages):
                return self._admit_runs(messages, handed)
            keys = zip(map(_topic_of, messages), map(_partition_of, messages), strict=True)
            lasts = dict(zip(keys, messages, strict=True))
        ends: dict[TP, int] = {}
        for key, last in lasts.items():
            tp: TP = (topic, key) if topic is not None else key  # type: ignore[assignment]
            if not self._open_through(tp, last):
                return self._admit_runs(messages, handed)
            ends[tp] = last.offset()  # type: ignore[assignment]  # never None for data
        handed.update(ends)
        return messages

    def _open_through(self, tp: TP, last: Message) -> bool:
        """Whether every record of ``tp`` up to ``last`` is admissible by the gate as cached (the
        caller has checked that none is stamped ahead of the log)."""
        if tp in self._held:
            return False
        offset: int = last.offset()  # type: ignore[assignment]
        return offset < self._open_until.get(tp, -1)

    def _ahead_in(self, messages: list[Message]) -> bool:
        """Whether any of ``messages`` is stamped with an epoch the epoch log has not shown here.
        Producers stamp only their first record of an epoch in a partition, so every record with
        headers is looked at (picked out in C: most have none)."""
        for message in compress(messages, map(_headers_of, messages)):
            stamped = stamped_epoch(message.headers())
            if stamped is not None and stamped > self._known_epoch(message.topic()):  # type: ignore[arg-type]
                return True
        return False

    def _admit_runs(self, messages: list[Message], handed: dict[TP, int]) -> list[Message]:
        """``_admit_all``, run by run (a run: one partition's consecutive records)."""
        admitted: list[Message] = []
        count = len(messages)
        start = 0
        while start < count:
            first = messages[start]
            if first.error() is not None:
                admitted.append(first)
                start += 1
                continue
            topic, partition = first.topic(), first.partition()
            end = start + 1
            while end < count:
                following = messages[end]
                if following.partition() != partition or following.error() is not None:
                    break
                if following.topic() != topic:
                    break
                end += 1
            tp: TP = (topic, partition)  # type: ignore[assignment]  # data messages have both
            self._admit_run(tp, messages[start:end], admitted, handed)
            start = end
        return admitted

    def _admit_run(self, tp: TP, run: list[Message], admitted: list[Message], handed: dict[TP, int]) -> None:
        held = self._held.get(tp)
        if held is not None:
            held.buffer.extend(run)  # behind a closed gate: keep the partition's order
            return
        if not self._ahead_in(run) and self._open_through(tp, run[-1]):
            admitted.extend(run)
            handed[tp] = run[-1].offset()  # type: ignore[assignment]
            return
        for message in run:  # a gate to evaluate, or an epoch the log has not shown yet
            if tp in self._held:
                self._held[tp].buffer.append(message)
                continue
            offset: int = message.offset()  # type: ignore[assignment]
            headers = message.headers()
            if headers is not None and self._ahead_of_log(tp, offset, headers, message):
                continue
            if offset < self._open_until.get(tp, -1) or self._admit(tp, offset):
                admitted.append(message)
                handed[tp] = offset
            else:
                self._held[tp].buffer.append(message)

    def _ahead_of_log(self, tp: TP, offset: int, headers: Any, message: Message) -> bool:
        """Hold ``message`` when its stamp names an epoch the epoch log has not shown yet."""
        stamped = stamped_epoch(headers)
        if stamped is None or stamped <= self._known_epoch(tp[0]):
            return False
        self._hold(tp, Gate(tp[1], offset, None), stamped).buffer.append(message)
        return True

    def commit(self, asynchronous: bool = False) -> None:
        """Commit everything handed out so far, including the last batch."""
        self._store_processed()
        try:
            if asynchronous:
                self._consumer.commit(asynchronous=True)
            else:
                self._consumer.commit(asynchronous=False)
        except Exception as error:  # nothing stored yet is not a failure
            if "NO_OFFSET" not in str(error):
                raise

    def closed_gates(self) -> dict[TP, Gate]:
        """Partitions held back now, with what each is waiting for."""
        return {tp: held.gate for tp, held in self._held.items()}

    @property
    def raw(self) -> Consumer:
        return self._consumer

    def close(self) -> None:
        self._store_processed()
        self._consumer.close()
        if self._progress_reader is not None:
            drain(self._progress_reader)
            self._progress_reader.close()
        self._unsubscribe()
        if self._owns_log:
            self._log.close()

    def __enter__(self) -> GatedConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the gate ----------------------------------------------------------------------------

    def _keeper(self, topic: str) -> tuple[GateKeeper | None, int]:
        """The topic's gate keeper and the history version it was built from."""
        with self._cache_lock:
            version = self._history_version
            if topic in self._keepers:
                return self._keepers[topic], version
        history = self._log.history(topic)
        keeper = GateKeeper(history) if history is not None else None
        with self._cache_lock:
            if version == self._history_version:  # else a newer history arrived: do not cache
                self._keepers[topic] = keeper
        return keeper, version

    def _admit(self, tp: TP, offset: int) -> bool:
        # A record's verdict never changes with a newer history (its epoch and requirements are
        # fixed once it exists); only what is cached for later records must not go stale.
        keeper, version = self._keeper(tp[0])
        if keeper is None:  # ordo never expanded this topic: nothing to gate
            self._remember_open(tp, math.inf, version)
            return True
        gate = self._gate(keeper, tp, offset, refresh=False)
        if not gate.open:
            gate = self._gate(keeper, tp, offset, refresh=True)
        if gate.open:
            self._remember_open(tp, _epoch_end(keeper.history, tp[1], offset), version)
            return True
        self._hold(tp, gate)
        return False

    def _hold(self, tp: TP, gate: Gate, stamped: int | None = None) -> _Held:
        """Pause ``tp`` behind ``gate`` (or until the epoch log knows epoch ``stamped``)."""
        now = time.monotonic()
        held = self._held[tp] = _Held(gate, now, now + self._min_backoff, self._min_backoff, [], stamped)
        self._consumer.pause([TopicPartition(*tp)])
        if self._trace:
            _log.debug("pause %s at %d: %s (stamped %s)", tp, gate.offset, dict(gate.waiting_for), stamped)
        metrics.gates_closed(tp[0], sum(1 for t, _ in self._held if t == tp[0]))
        return held

    def _known_epoch(self, topic: str) -> int:
        """The newest active epoch of ``topic`` in this consumer's view of the epoch log (0 for
        a topic ordo never expanded, which its producers stamp as epoch 0)."""
        history = self._log.history(topic)
        return history.active.epoch if history is not None else 0

    def _gate(self, keeper: GateKeeper, tp: TP, offset: int, refresh: bool) -> Gate:
        """The gate of a record, from how far partitions have been processed: by this consumer
        (whether or not it still owns them: processed is processed), or by the group as its
        committed offsets say (or the log start, if the data is gone), whichever is further."""
        topic = tp[0]
        local = {p: o for (t, p), o in self._processed.items() if t == topic}
        gate = keeper.gate(tp[1], offset, local)
        if gate.open or not refresh:
            return gate
        progress = dict(local)
        wanted = [TopicPartition(topic, p) for p in gate.waiting_for]
        if self._progress_reader is None:
            self._progress_reader = Consumer({**self._progress_config, "enable.auto.commit": False})
        reader = self._progress_reader
        try:
            if topic in self._reader_stale:
                # the reader's metadata is its own: partitions added since it last looked are
                # unknown to it (Local: Unknown partition) until librdkafka's 5-minute refresh
                self._reader_stale.discard(topic)  # first: a newer epoch meanwhile marks it again
                reader.list_topics(topic, timeout=5)
            for committed in reader.committed(wanted, timeout=5):
                position = committed.offset if committed.offset >= 0 else 0
                low, _ = reader.get_watermark_offsets(committed, timeout=5, cached=False)
                progress[committed.partition] = max(progress.get(committed.partition, 0), position, low)
        except KafkaException as error:
            # The broker could not say (a leader move, a coordinator failover): the gate stays
            # closed and is checked again after the backoff; the chaos soak found the consumer
            # dying here on a NOT_LEADER_FOR_PARTITION answer to ListOffsets.
            _log.warning("gate of %s: progress of %s unknown for now: %s", tp, gate.waiting_for, error)
            self._reader_stale.add(topic)
            return gate
        finally:
            drain(reader)  # its log lines: the reader has no assignment and is never polled otherwise
        return keeper.gate(tp[1], offset, progress)

    def _check_held(self) -> None:
        now = time.monotonic()
        for tp, held in list(self._held.items()):
            if now < held.next_check:
                continue
            if held.stamped is not None and held.stamped > self._known_epoch(tp[0]):
                gate_open = False  # the epoch log is still behind the record's producer
            else:
                held.stamped = None
                gate_open = self._reopens(tp, held)
            if gate_open:
                del self._held[tp]
                if held.warned:  # an epoch covers it now
                    still = sum(1 for (t, _), h in self._held.items() if t == tp[0] and h.warned)
                    metrics.unknown_partitions(tp[0], still)
                self.gate_waits.append(now - held.since)
                metrics.gate_wait(tp[0], now - held.since)
                metrics.gates_closed(tp[0], sum(1 for t, _ in self._held if t == tp[0]))
                # the buffered records go first; a later one may meet the next epoch's gate
                self._ready.extend(self._admit_all(held.buffer, {}))
                if self._trace:
                    _log.debug("gate of %s at %d open: %s", tp, held.gate.offset, _spans(held.buffer))
                if tp not in self._held:
                    self._consumer.resume([TopicPartition(*tp)])
            else:
                held.backoff = min(held.backoff * 2, self._max_backoff)
                held.next_check = now + held.backoff
                if held.gate.unknown_epoch and held.stamped is None:
                    self._report_unknown(tp, held, now)

    def _report_unknown(self, tp: TP, held: _Held, now: float) -> None:
        """Say loudly that ``tp`` is held because it belongs to no epoch and is not being
        created by ordo (no fencing epoch covers it): it was added outside ordo."""
        if now - held.since < UNKNOWN_PARTITION_GRACE or now - held.warned < UNKNOWN_PARTITION_GRACE:
            return
        history = self._log.history(tp[0])
        if history is None or tp[1] < history.current.partitions:
            return  # being created by an expansion in flight (or unknown topic): it will be published
        held.warned = now
        unknown = sorted(p for (t, p), h in self._held.items() if t == tp[0] and h.gate.unknown_epoch)
        metrics.unknown_partitions(tp[0], len(unknown))
        _log.warning(
            "%s: partitions %s belong to no epoch of its history (%d partitions at epoch %d): they "
            "were added outside ordo, and their records are held; an OrderedTopicExpansion of %s to "
            "%d or more partitions covers them with an epoch and opens them in order",
            tp[0], unknown, history.current.partitions, history.current.epoch, tp[0], max(unknown) + 1,
        )  # fmt: skip

    def _reopens(self, tp: TP, held: _Held) -> bool:
        """Re-evaluate a held partition's gate with the group's progress now."""
        keeper, version = self._keeper(tp[0])
        offset = held.gate.offset
        if keeper is None:
            return True
        held.gate = self._gate(keeper, tp, offset, refresh=True)
        if held.gate.open:
            self._remember_open(tp, _epoch_end(keeper.history, tp[1], offset), version)
        return held.gate.open

    def _next_check_in(self) -> float:
        return max(0.0, min(h.next_check for h in self._held.values()) - time.monotonic())

    def _store_processed(self) -> None:
        if self._pending_store:
            self._store_handed_out()
        now = time.monotonic()
        if now >= self._next_skip_check:
            self._next_skip_check = now + _SKIP_CHECK_INTERVAL
            self._store_skipped()

    def _progressed(self, advanced: list[tuple[TP, int, int]]) -> None:
        """After storing offsets (partition, from, to): commit them now if one passed a
        threshold that a gate may be waiting for (another member's, or this one's after a
        rebalance)."""
        if not self._commit_on_threshold:
            return
        for (topic, partition), before, after in advanced:
            keeper, _ = self._keeper(topic)
            if keeper is not None and keeper.crossed(partition, before, after):
                try:
                    self._consumer.commit(asynchronous=True)
                except KafkaException as error:  # auto-commit still commits them, later
                    _log.debug("commit at a threshold of %s[%d] not sent: %s", topic, partition, error)
                if self._trace:
                    _log.debug(
                        "committed at a threshold of %s[%d] (%d -> %d)", topic, partition, before, after
                    )
                return

    def _store_skipped(self) -> None:
        """Count as processed what the consumer passed without handing out: the transaction
        markers (and aborted records) after a partition's last record. A threshold is an end
        offset, and a transactional producer's last record is followed by its commit marker,
        so a gate waiting for that partition would otherwise never open (two partitions waiting
        for each other after a 2 -> 3 expansion: the chaos soak's stalled consumers)."""
        # Everything below a partition's first record not yet handed out (held behind a gate,
        # or admitted and waiting in _ready) was processed or skipped; without one, everything
        # below the consumer's position was.
        waiting = {tp: held.gate.offset for tp, held in self._held.items()}
        for message in self._ready:
            where, offset = _position(message)
            waiting[where] = min(offset, waiting.get(where, offset))
        try:
            positions = self._consumer.position(self._consumer.assignment())
        except KafkaException:
            return  # not now (e.g. mid-rebalance); the next check catches up
        processed = self._processed
        skipped = []
        advanced = []
        for tp in positions:
            key = (tp.topic, tp.partition)
            done = min(tp.offset, waiting.get(key, tp.offset))
            before = processed.get(key, -1)
            if done > before and done >= 0:
                processed[key] = done
                skipped.append(TopicPartition(tp.topic, tp.partition, done))
                advanced.append((key, before, done))
        if skipped:
            if self._trace:
                _log.debug("store passed %s", {(t.topic, t.partition): t.offset for t in skipped})
            self._consumer.store_offsets(offsets=skipped)
            self._progressed(advanced)

    def _store_handed_out(self) -> None:
        processed = self._processed
        offsets = []
        advanced = []
        for key, offset in self._pending_store.items():
            advanced.append((key, processed.get(key, -1), offset + 1))
            processed[key] = offset + 1
            offsets.append(TopicPartition(key[0], key[1], offset + 1))
        if self._trace:
            _log.debug("store handed out %s", {(t.topic, t.partition): t.offset for t in offsets})
        self._consumer.store_offsets(offsets=offsets)
        self._pending_store = {}
        self._progressed(advanced)

    # -- events ------------------------------------------------------------------------------

    def _see_new_partitions(self) -> None:
        """Ask for every topic's metadata: librdkafka checks the subscription's partition counts
        against it and rejoins the group (an explicit request for one topic does not do that;
        measured on Kafka 4.3: new partitions assigned 0.1 s after, against the 5-minute refresh)."""
        self._grown.clear()
        try:
            self._consumer.list_topics(timeout=5)
        except KafkaException as error:
            _log.warning(
                "new partitions of %s: metadata not read now (%s); librdkafka's refresh will",
                self.topics,
                error,
            )

    def _on_history(self, history: EpochHistory) -> None:
        # Called on the epoch log's thread. A gate evaluated meanwhile on the consumer's thread
        # with the old history must not leave its verdict behind: the version says it is stale.
        self._reader_stale.add(history.topic)
        active = history.active.epoch
        if (
            self._subscribed
            and history.topic in self.topics
            and active > self._active_seen.get(history.topic, 0)
        ):
            self._active_seen[history.topic] = active
            self._grown.set()
        with self._cache_lock:
            self._history_version += 1
            self._keepers.pop(history.topic, None)
            for tp in [tp for tp in self._open_until if tp[0] == history.topic]:
                self._open_until.pop(tp, None)

    def _remember_open(self, tp: TP, until: float, version: int) -> None:
        """Cache that ``tp``'s records are open up to offset ``until``, unless the history changed
        since ``version`` (the next record is then checked against the new history)."""
        with self._cache_lock:
            if version == self._history_version:
                self._open_until[tp] = until

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # librdkafka keeps a partition's pause flag across revoke and re-assign: a partition that
        # was held when it went away would come back paused with no gate to reopen it
        if self._trace:
            _log.debug("assigned %s", [(tp.topic, tp.partition, tp.offset) for tp in partitions])
        consumer.resume(partitions)
        if self._user_assign is not None:
            self._user_assign(consumer, partitions)

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Only what was handed out: called from within consume(), the position may already count
        # records this call is about to hand out.
        if self._trace:
            revoked = [(tp.topic, tp.partition) for tp in partitions]
            _log.debug("revoked %s; held %s", revoked, list(self._held))
        if self._pending_store:
            self._store_handed_out()
        held = [tp for tp in partitions if (tp.topic, tp.partition) in self._held]
        if held:
            consumer.resume(held)  # see _assigned: never hand a paused partition back
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self._revoked_now |= gone
        self._ready = deque(m for m in self._ready if _position(m)[0] not in gone)
        for key in gone:  # what we processed stays known: it still counts for gates
            self._held.pop(key, None)
            self._open_until.pop(key, None)
        if self._user_revoke is not None:
            self._user_revoke(consumer, partitions)


def _epoch_end(history: EpochHistory, partition: int, offset: int) -> float:
    """The offset in ``partition`` where the epoch of the record at ``offset`` ends (its next
    threshold), or infinity when that epoch is the latest for this partition."""
    for entry in history.active_epochs:
        if entry.from_partitions is not None and partition < entry.from_partitions:
            threshold = entry.thresholds[partition]
            if threshold > offset:
                return threshold
    return math.inf


def _spans(messages: Iterable[Message]) -> str:
    """Per partition, the first and last offset of ``messages`` and how many there were."""
    spans: dict[tuple[Any, Any], list[int]] = {}
    for message in messages:
        if message.error() is None:
            offset: int = message.offset()  # type: ignore[assignment]
            span = spans.setdefault((message.topic(), message.partition()), [offset, offset, 0])
            span[1], span[2] = offset, span[2] + 1
    return " ".join(f"{t}[{p}]@{a}-{b}({n})" for (t, p), (a, b, n) in spans.items())


def _position(message: Message) -> tuple[TP, int]:
    """(topic, partition), offset of a data message (never None for those)."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    assert topic is not None and partition is not None and offset is not None
    return (topic, partition), offset
