# ConsumerGate is over 450 lines on purpose for now: the decisions are in gate, placement and
# progress; this holds the state both consumers share under one lock, split further by issue 46.
"""A consumer's ordering gate (KIP-253; docs/architecture.md, "The gate"), shared by GatedConsumer
and AsyncConsumer: which fetched records may be handed out now, the records held back meanwhile,
and when those may go.

The consumer gives it each fetched batch (``admit``, or ``admit_run`` per partition's run) and
its own progress: a mapping it keeps up to date, (topic, partition) -> the offset below which
every record is done (GatedConsumer: handed out and counted processed at the next poll;
AsyncConsumer: completed by its workers, in order). A record whose gate is closed is held with
every later record of its partition, and the consumer pauses the partition (``pause``). The
group's progress of the partitions held gates wait for is fetched off the consumer's thread
(``ProgressWatcher``); ``review``, called by the consumer's thread, evaluates the held gates
against the latest snapshot (pure, ``ordo.epochs.progress``) and hands back the records of those
that opened (the consumer resumes the partition: ``resume``).

Admitting records, it also finds the misplaced ones (``ordo.epochs.placement``: placed by an old
partition count after their partition's threshold), in the same C pass over the batch, for the
partitions and offsets where the rule can apply. Each is said in a WARNING line and counted
(``ordo_gate_misplaced_records_total``); unless the consumer's policy delivers them, it is kept
(``is_misplaced``) for the consumer to raise or hand to its callback instead of delivering it.

Not thread-safe: one thread at a time (the GatedConsumer's caller, or the AsyncConsumer's lock
holder); the epoch log's thread only invalidates what is cached.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import compress
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaException, Message

from .. import metrics
from .._batch_scan import Rules, scan
from .._clients import consumer_side, logged
from ..errors import ConfigError
from ..topic_partition import TP
from .gate import Gate, GateKeeper
from .history import EpochHistory
from .log import EpochLog, refuse_unread
from .placement import Misplacement, misplacement, topic_checks
from .progress import TopicProgress, asked, verdicts
from .stamp import stamped_epoch
from .watcher import ProgressWatcher

__all__ = [
    "UNKNOWN_PARTITION_GRACE",
    "ConsumerGate",
    "MisplacedPolicy",
    "OnMisplaced",
    "misplaced_message",
    "misplaced_policy",
    "see_new_partitions",
]

_log = logging.getLogger(__name__)
_error_of, _headers_of = Message.error, Message.headers
_partition_of, _topic_of = Message.partition, Message.topic
# A partition no epoch covers is normal for a moment (ordo's producers write to a new partition
# once its epoch is published, and this consumer's epoch log may lag theirs); held this long, it
# was added outside ordo. Said again at this interval while it lasts.
UNKNOWN_PARTITION_GRACE = 10.0
MisplacedPolicy = Literal["raise", "callback", "deliver"]
"""What the consumer does with a misplaced record: raises it (MisplacedRecordError), hands it to
its callback, or delivers it (only said and counted)."""
_DOING = {
    "raise": "not delivered: raised to the application (MisplacedRecordError)",
    "callback": "not delivered: handed to on_misplaced",
    "deliver": "delivered as it is (on_misplaced='deliver')",
}


@dataclass
class _Held:
    """A partition waiting for its gate, with the records fetched for it meanwhile (the first one
    is the record whose gate is closed). Keeping them avoids a seek and a refetch, which costs
    librdkafka most of a second."""

    gate: Gate
    since: float
    buffer: list[Message]
    stamped: int | None = None
    """Set when the first record carries an epoch the epoch log has not shown yet."""
    warned: float = 0.0
    """When the partition was last reported as covered by no epoch (0: never)."""


class ConsumerGate:
    """The gate of one consumer of ``topics`` (``config``: the consumer's, with its group.id).
    ``subscribed``: the consumer subscribes (not assigns by hand), so ``grown`` is set when a
    topic's new epoch is published and the consumer should ask for metadata
    (``see_new_partitions``). ``named``: every topic the consumer reads. ``unknown_grace``: how
    long a partition no epoch covers is held before it is said to be added outside ordo.
    ``misplaced``: the consumer's policy for misplaced records (kept for it unless "deliver")."""

    def __init__(
        self,
        config: Mapping[str, Any],
        topics: list[str],
        *,
        epoch_topic: str,
        epoch_log: EpochLog | None,
        progress: Mapping[TP, int],
        pause: Callable[[TP], None],
        resume: Callable[[TP], None],
        subscribed: bool,
        named: set[str],
        min_backoff: float = 0.02,
        max_backoff: float = 0.25,
        on_snapshot: Callable[[], None] | None = None,
        unknown_grace: float = UNKNOWN_PARTITION_GRACE,
        misplaced: MisplacedPolicy = "raise",
    ) -> None:
        self.topics = topics
        self._policy: MisplacedPolicy = misplaced
        # misplaced records admitted and not yet raised or handed over: id -> (partition, record,
        # what is wrong with it); by id, as the consumer's lists hold the records themselves
        self._misplaced: dict[int, tuple[TP, Message, Misplacement]] = {}
        self._rules: dict[str, Rules | None] = {}  # per topic, while its history is the same
        self._unknown_grace = unknown_grace
        self._progress = progress
        self._pause, self._resume = pause, resume
        self._max_backoff = max_backoff
        # progress queries go over a connection of their own: on the consumer's, they would queue
        # behind its fetch long-poll (fetch.wait.max.ms) and the gate would open late
        reader = logged(consumer_side({k: v for k, v in config.items() if not callable(v)}))
        self._watcher = ProgressWatcher(reader, min_backoff, max_backoff, on_snapshot)
        client = {k: v for k, v in config.items() if k not in ("group.id", "group.instance.id")}
        self._owns_log = epoch_log is None
        self._log = epoch_log or EpochLog(client, epoch_topic)
        self._keepers: dict[str, GateKeeper | None] = {}
        self._cache_lock = threading.Lock()
        self._history_version = 0
        self._open_until: dict[TP, float] = {}
        self._held: dict[TP, _Held] = {}
        self._closed_per_topic: Counter[str] = Counter()
        self._wanted_stale = False  # held gates changed: the watcher's partitions need asking again
        self._moved = False  # this consumer's progress crossed a threshold since the last review
        self._reviewed: tuple[Mapping[TP, int], int] = ({}, -1)  # the snapshot and history reviewed last
        self._next_unknown_check = 0.0
        self.gate_waits: list[float] = []
        """Seconds each closed gate held its partition."""
        self._trace = _log.isEnabledFor(logging.DEBUG)
        self.grown = threading.Event()
        self._subscribed = subscribed
        self._active_seen: dict[str, int] = {}
        self._only_topic: str | None = topics[0] if len(named) == 1 else None
        self._unsubscribe = self._log.subscribe(self._on_history)
        try:  # judging records by a partial history could hand a moved key's records out of order
            refuse_unread(self._log, str(config.get("bootstrap.servers")))
        except ConfigError:
            self.close()
            raise

    # -- admitting fetched records -------------------------------------------------------------

    def admit(self, messages: list[Message], handed: dict[TP, int]) -> list[Message]:
        """The admissible ``messages``, in order; the rest wait in their partition's buffer.
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
            error, headers, lasts, misplaced = scan(messages, self._rules_of(topic))
            if error or (headers and self._ahead_in(messages)):
                return self._admit_runs(messages, handed, _ids(messages, misplaced))
        else:
            misplaced = self._misplaced_in(messages)
            if any(map(_error_of, messages)) or self._ahead_in(messages):
                return self._admit_runs(messages, handed, _ids(messages, misplaced))
            keys = zip(map(_topic_of, messages), map(_partition_of, messages), strict=True)
            lasts = dict(zip(keys, messages, strict=True))
        ends: dict[TP, int] = {}
        for key, last in lasts.items():
            tp: TP = (topic, key) if topic is not None else key  # type: ignore[assignment]
            if not self._open_through(tp, last):
                return self._admit_runs(messages, handed, _ids(messages, misplaced))
            ends[tp] = last.offset()  # type: ignore[assignment]  # never None for data
        handed.update(ends)
        if misplaced:
            self._found([messages[i] for i in misplaced])
        return messages

    def look(self, messages: list[Message]) -> tuple[bool, set[int] | None]:
        """For a consumer that admits a fetched batch run by run (``admit_run``): whether any
        record may carry headers, and the ids of the misplaced records (None: none)."""
        topic = self._only_topic
        if topic is not None:
            _, headers, _, misplaced = scan(messages, self._rules_of(topic))
        else:
            headers, misplaced = any(map(_headers_of, messages)), self._misplaced_in(messages)
        return headers, _ids(messages, misplaced)

    def _misplaced_in(self, messages: list[Message]) -> list[int]:
        """The misplaced records of a batch of several topics: each topic's records scanned
        with its rules (a Python pass to split them; a consumer of one topic needs none)."""
        by_topic: dict[str, list[int]] = {}
        for index, topic in enumerate(map(_topic_of, messages)):
            if topic is not None:
                by_topic.setdefault(topic, []).append(index)
        found: list[int] = []
        for topic, indices in by_topic.items():
            rules = self._rules_of(topic)
            if rules is not None:
                found += [indices[i] for i in scan([messages[i] for i in indices], rules)[3]]
        return sorted(found)

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

    def _admit_runs(
        self, messages: list[Message], handed: dict[TP, int], flagged: set[int] | None
    ) -> list[Message]:
        """``admit``, run by run (a run: one partition's consecutive records); ``flagged``: the
        ids of the misplaced records."""
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
            self.admit_run(tp, messages[start:end], admitted, handed, flagged=flagged)
            start = end
        self.ask_watcher()
        return admitted

    def admit_run(
        self,
        tp: TP,
        run: list[Message],
        admitted: list[Message],
        handed: dict[TP, int],
        headers: bool = True,
        flagged: set[int] | None = None,
    ) -> None:
        """Append to ``admitted`` the admissible records of ``run`` (records of ``tp``, in
        order); hold the others. ``headers``: False when no record of ``run`` has any (a stamp
        is then no reason to look); ``flagged``: the ids of the batch's misplaced records
        (``look``). Call ``ask_watcher`` after the batch's runs."""
        held = self._held.get(tp)
        if held is not None:
            held.buffer.extend(run)  # behind a closed gate: keep the partition's order
            return
        if self._open_through(tp, run[-1]) and not (headers and self._ahead_in(run)):
            admitted.extend(run)
            handed[tp] = run[-1].offset()  # type: ignore[assignment]
            if flagged:
                self._found([m for m in run if id(m) in flagged])
            return
        start = len(admitted)
        for message in run:  # a gate to evaluate, or an epoch the log has not shown yet
            if tp in self._held:
                self._held[tp].buffer.append(message)
                continue
            offset: int = message.offset()  # type: ignore[assignment]
            stamps = message.headers() if headers else None
            if stamps is not None and self._ahead_of_log(tp, offset, stamps, message):
                continue
            if offset < self._open_until.get(tp, -1) or self._admit(tp, offset):
                admitted.append(message)
                handed[tp] = offset
            else:
                self._held[tp].buffer.append(message)
        if flagged:  # only what was admitted: a held record is judged when its gate opens
            self._found([m for m in admitted[start:] if id(m) in flagged])

    def _ahead_of_log(self, tp: TP, offset: int, headers: Any, message: Message) -> bool:
        """Hold ``message`` when its stamp names an epoch the epoch log has not shown yet."""
        stamped = stamped_epoch(headers)
        if stamped is None or stamped <= self._known_epoch(tp[0]):
            return False
        self._hold(tp, Gate(tp[1], offset, None), stamped).buffer.append(message)
        return True

    def _admit(self, tp: TP, offset: int) -> bool:
        """Whether the record at ``offset`` may go now, judged by this consumer's progress and
        the group's as last fetched; if not, its partition is held (the watcher is told at the
        end of the batch: ``ask_watcher``). A record's verdict never
        changes with a newer history (its epoch and requirements are fixed once it exists); only
        what is cached for later records must not go stale."""
        keeper, version = self._keeper(tp[0])
        if keeper is None:  # ordo never expanded this topic: nothing to gate
            self._remember_open(tp, math.inf, version)
            return True
        progress = TopicProgress(tp[0], self._progress, self._watcher.snapshot)
        gate = keeper.gate(tp[1], offset, progress)
        if gate.open:
            self._remember_open(tp, _epoch_end(keeper.history, tp[1], offset), version)
            return True
        self._hold(tp, gate)
        return False

    def _hold(self, tp: TP, gate: Gate, stamped: int | None = None) -> _Held:
        """Hold ``tp`` behind ``gate`` (or until the epoch log knows epoch ``stamped``)."""
        held = self._held[tp] = _Held(gate, time.monotonic(), [], stamped)
        self._wanted_stale = True
        self._pause(tp)
        if self._trace:
            _log.debug("pause %s at %d: %s (stamped %s)", tp, gate.offset, dict(gate.waiting_for), stamped)
        self._closed_per_topic[tp[0]] += 1
        metrics.gates_closed(tp[0], self._closed_per_topic[tp[0]])
        if self._closed_per_topic[tp[0]] == 1:  # the topic's first: the oldest closed now
            self._report_oldest([tp[0]])
        return held

    def _report_oldest(self, topics: Iterable[str]) -> None:
        """``ordo_gate_closed_since_seconds``: when each topic's longest-held gate closed (so a
        gate that never opens shows, where ``ordo_gate_wait_seconds`` observes it only when it
        opens). Once per topic whose held set lost or gained its first member."""
        if not metrics.AVAILABLE:
            return
        to_wall = time.time() - time.monotonic()
        for topic in set(topics):
            oldest = min((h.since for (t, _), h in self._held.items() if t == topic), default=None)
            metrics.gate_closed_since(topic, None if oldest is None else oldest + to_wall)

    # -- misplaced records ----------------------------------------------------------------------

    def _rules_of(self, topic: str) -> Rules | None:
        """Where ``topic``'s records may be misplaced (partition -> its checked offset ranges),
        or None when nowhere (a topic ordo never expanded): worked out once per history."""
        with self._cache_lock:
            version = self._history_version
            if topic in self._rules:
                return self._rules[topic]
        keeper, _ = self._keeper(topic)
        rules = (topic_checks(keeper.history.active_epochs) or None) if keeper is not None else None
        with self._cache_lock:
            if version == self._history_version:  # else a newer history arrived: do not cache
                self._rules[topic] = rules
        return rules

    def _found(self, messages: list[Message]) -> None:
        """Admitted records the scan found misplaced: said, counted and (unless delivered) kept
        for the consumer. Judged again by the rule as stated, with the history the gate has now
        (the same, but for a history that changed since the scan)."""
        if not messages:
            return
        counted: Counter[str] = Counter()
        for message in messages:
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            assert topic is not None and partition is not None and offset is not None  # data records
            keeper, _ = self._keeper(topic)
            active = keeper.history.active_epochs if keeper is not None else ()
            found = misplacement(active, partition, offset, message.key()) if active else None
            if found is None:
                continue
            counted[topic] += 1
            _log.warning("%s: %s", found.describe(topic), _DOING[self._policy])
            if self._policy != "deliver":
                self._misplaced[id(message)] = ((topic, partition), message, found)
        for topic, count in counted.items():
            metrics.misplaced_records(topic, count)

    @property
    def holds_misplaced(self) -> bool:
        """Whether admitted records wait to be raised or handed over (the consumer looks for
        them among what it hands out only then)."""
        return bool(self._misplaced)

    def is_misplaced(self, message: Message) -> bool:
        return id(message) in self._misplaced

    def misplacements(self, messages: Iterable[Message]) -> list[tuple[str, Misplacement]]:
        """(topic, what is wrong) of each of ``messages`` kept as misplaced."""
        found = (self._misplaced.get(id(m)) for m in messages)
        return [(tp[0], what) for tp, _, what in filter(None, found)]

    def settle_misplaced(self, messages: Iterable[Message]) -> None:
        """``messages`` were raised or handed over: no longer kept."""
        for message in messages:
            self._misplaced.pop(id(message), None)

    # -- held gates ----------------------------------------------------------------------------

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def is_held(self, tp: TP) -> bool:
        return tp in self._held

    def closed_gates(self) -> dict[TP, Gate]:
        """Partitions held back now, with what each is waiting for."""
        return {tp: held.gate for tp, held in self._held.items()}

    def held_offsets(self) -> dict[TP, int]:
        """Each held partition's first record not handed out."""
        return {tp: held.gate.offset for tp, held in self._held.items()}

    def progressed(self, advanced: Iterable[tuple[TP, int, int]]) -> bool:
        """This consumer's progress moved (partition, from, to): whether it crossed a threshold
        that a gate may be waiting for (another member's, or a held one of this consumer's,
        which the next ``review`` then looks at)."""
        for (topic, partition), before, after in advanced:
            keeper, _ = self._keeper(topic)
            if keeper is not None and keeper.crossed(partition, before, after):
                self._moved = True
                if self._trace:
                    _log.debug("%s[%d] past a threshold (%d -> %d)", topic, partition, before, after)
                return True
        return False

    def wait_cap(self) -> float:
        """How long the consumer may block in a fetch while gates are held: until just after the
        next snapshot may come, at most ``max_backoff``."""
        return min(self._max_backoff, self._watcher.due_in() + 0.005)

    def review(self) -> list[Message]:
        """Evaluate the held gates if anything they depend on changed (the group's progress
        snapshot, this consumer's progress past a threshold, the epoch log); the records of those
        that opened, admitted (a later one may meet the next epoch's gate and be held again)."""
        if not self._held:
            return []
        snapshot, history = self._watcher.snapshot, self._history_version
        now = time.monotonic()
        if now >= self._next_unknown_check:
            self._next_unknown_check = now + self._max_backoff
            self._report_unknown(now)
        if self._reviewed == (snapshot, history) and not self._moved:
            return []
        self._reviewed, self._moved = (snapshot, history), False
        opened: list[tuple[TP, _Held]] = []
        for topic in {tp[0] for tp in self._held}:
            opened += self._review_topic(topic, snapshot)
        released: list[Message] = []
        for tp, held in opened:
            del self._held[tp]
            self._closed_per_topic[tp[0]] -= 1
            if held.warned:  # an epoch covers it now
                still = sum(1 for (t, _), h in self._held.items() if t == tp[0] and h.warned)
                metrics.unknown_partitions(tp[0], still)
            self.gate_waits.append(now - held.since)
            metrics.gate_wait(tp[0], now - held.since)
            metrics.gates_closed(tp[0], self._closed_per_topic[tp[0]])
            # the buffered records go first; a later one may meet the next epoch's gate
            released += self.admit(held.buffer, {})
            if self._trace:
                _log.debug("gate of %s at %d open: %s", tp, held.gate.offset, spans(held.buffer))
            if tp not in self._held:
                self._resume(tp)
        self._report_oldest(tp[0] for tp, _ in opened)
        self._wanted_stale = True
        self.ask_watcher()
        return released

    def _review_topic(self, topic: str, snapshot: Mapping[TP, int]) -> list[tuple[TP, _Held]]:
        """The held partitions of ``topic`` whose gate opened; the others get their new verdict."""
        keeper, version = self._keeper(topic)
        known = self._known_epoch(topic)
        judged: dict[int, int] = {}
        opened: list[tuple[TP, _Held]] = []
        for (t, partition), held in self._held.items():
            if t != topic:
                continue
            if held.stamped is not None and held.stamped > known:
                continue  # the epoch log is still behind the record's producer
            held.stamped = None
            if keeper is None:
                opened.append(((t, partition), held))
            else:
                judged[partition] = held.gate.offset
        if keeper is None or not judged:
            return opened
        progress = TopicProgress(topic, self._progress, snapshot)
        for partition, gate in verdicts(keeper, judged, progress).items():
            tp = (topic, partition)
            held = self._held[tp]
            held.gate = gate
            if gate.open:
                self._remember_open(tp, _epoch_end(keeper.history, partition, gate.offset), version)
                opened.append((tp, held))
        return opened

    def ask_watcher(self) -> None:
        """Tell the watcher which partitions the held gates wait for now, if that changed: once
        per batch (a batch may hold a thousand partitions)."""
        if self._wanted_stale:
            self._wanted_stale = False
            self._watcher.want(asked((tp[0], held.gate) for tp, held in self._held.items()))

    def _report_unknown(self, now: float) -> None:
        """Say loudly which held partitions belong to no epoch and are not being created by ordo
        (no fencing epoch covers them): they were added outside ordo."""
        unknown: dict[str, list[int]] = {}
        for (topic, partition), held in self._held.items():
            if held.gate.unknown_epoch and held.stamped is None:
                unknown.setdefault(topic, []).append(partition)
        for topic, partitions in unknown.items():
            history = self._log.history(topic)
            due = [
                p
                for p in partitions
                if now - self._held[(topic, p)].since >= self._unknown_grace
                and now - self._held[(topic, p)].warned >= self._unknown_grace
                and history is not None
                and p >= history.current.partitions  # else being created by an expansion in flight
            ]
            if not due or history is None:
                continue
            for p in due:
                self._held[(topic, p)].warned = now
            metrics.unknown_partitions(topic, len(partitions))
            _log.warning(
                "%s: partitions %s belong to no epoch of its history (%d partitions at epoch %d): they "
                "were added outside ordo, and their records are held; an OrderedTopicExpansion of %s to "
                "%d or more partitions covers them with an epoch and opens them in order",
                topic, sorted(partitions), history.current.partitions, history.current.epoch, topic,
                max(partitions) + 1,
            )  # fmt: skip

    def drop(self, partitions: Iterable[TP]) -> list[TP]:
        """Partitions gone from this consumer (revoked, lost): forget their held records (never
        handed out: the next owner reads them) and what is cached; returns those that were held.
        What this consumer processed of them stays known: it still counts for gates. Their
        misplaced records not yet raised or handed over are forgotten too (the next owner's
        gate finds them again)."""
        gone = set(partitions)
        was_held = []
        for tp in gone:
            held = self._held.pop(tp, None)
            if held is not None:
                was_held.append(tp)
                self._closed_per_topic[tp[0]] -= 1
                metrics.gates_closed(tp[0], self._closed_per_topic[tp[0]])
            self._open_until.pop(tp, None)
        if self._misplaced:
            for key in [k for k, (tp, _, _) in self._misplaced.items() if tp in gone]:
                del self._misplaced[key]
        if was_held:
            self._report_oldest(tp[0] for tp in was_held)
            self._wanted_stale = True
            self.ask_watcher()
        return was_held

    # -- the epoch log -------------------------------------------------------------------------

    def _known_epoch(self, topic: str) -> int:
        """The newest active epoch of ``topic`` in this consumer's view of the epoch log (0 for
        a topic ordo never expanded, which its producers stamp as epoch 0)."""
        history = self._log.history(topic)
        return history.active.epoch if history is not None else 0

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

    def _remember_open(self, tp: TP, until: float, version: int) -> None:
        """Cache that ``tp``'s records are open up to offset ``until``, unless the history changed
        since ``version`` (the next record is then checked against the new history)."""
        with self._cache_lock:
            if version == self._history_version:
                self._open_until[tp] = until

    def _on_history(self, history: EpochHistory) -> None:
        # Called on the epoch log's thread. A gate evaluated meanwhile on the consumer's thread
        # with the old history must not leave its verdict behind: the version says it is stale.
        self._watcher.stale(history.topic)
        active = history.active.epoch
        topic = history.topic
        if self._subscribed and topic in self.topics and active > self._active_seen.get(topic, 0):
            self._active_seen[topic] = active
            self.grown.set()
        with self._cache_lock:
            self._history_version += 1
            self._keepers.pop(history.topic, None)
            self._rules.pop(history.topic, None)
            for tp in [tp for tp in self._open_until if tp[0] == history.topic]:
                self._open_until.pop(tp, None)

    def close(self) -> None:
        self._watcher.close()
        self._unsubscribe()
        if self._owns_log:
            self._log.close()


def see_new_partitions(consumer: Consumer, topics: list[str], grown: threading.Event) -> None:
    """Ask for every topic's metadata: librdkafka checks the subscription's partition counts
    against it and rejoins the group (an explicit request for one topic does not do that;
    measured on Kafka 4.3: new partitions assigned 0.1 s after, against the 5-minute refresh)."""
    grown.clear()
    try:
        consumer.list_topics(timeout=5)
    except KafkaException as error:
        _log.warning("new partitions of %s: metadata not read now (%s); librdkafka's refresh will", topics,
                     error)  # fmt: skip


OnMisplaced = Literal["raise", "deliver"] | Callable[[list[Message]], None]
"""A consumer's ``on_misplaced``: "raise" (MisplacedRecordError, the default), a callable given
the misplaced records instead of delivering them, or "deliver"."""


def misplaced_policy(on_misplaced: object, who: str) -> MisplacedPolicy:
    """The gate's policy for a consumer's ``on_misplaced``; ConfigError for anything else."""
    if callable(on_misplaced):
        return "callback"
    if on_misplaced in ("raise", "deliver"):
        return on_misplaced
    raise ConfigError(
        f"{who}: on_misplaced must be 'raise' (the default: MisplacedRecordError), 'deliver' (for "
        "topics whose keyed records are not placed by murmur2: round-robin or explicit producers) "
        f"or a callable given the misplaced records (e.g. one that writes them to a dead-letter "
        f"topic), got {on_misplaced!r}"
    )


def misplaced_message(topics_and_found: list[tuple[str, Misplacement]], call: str) -> str:
    """MisplacedRecordError's message: what was found (the first few) and what to do."""
    shown = "; ".join(found.describe(topic) for topic, found in topics_and_found[:3])
    more = f" (and {len(topics_and_found) - 3} more)" if len(topics_and_found) > 3 else ""
    return (
        f"{len(topics_and_found)} misplaced record(s) not delivered: {shown}{more}. A producer wrote "
        f"them by an old partition count after the expansion's thresholds, so their keys' order "
        f"cannot be kept. They are in the error's records; the next {call} goes on after them. "
        "on_misplaced=callable hands such records over instead (a dead-letter topic), "
        "on_misplaced='deliver' delivers them (topics whose keyed records are not placed by "
        "murmur2: round-robin or explicit producers)"
    )


def _ids(messages: list[Message], indices: list[int]) -> set[int] | None:
    """The ids of ``messages[i]`` for each of ``indices`` (None when there are none)."""
    return {id(messages[i]) for i in indices} if indices else None


def _epoch_end(history: EpochHistory, partition: int, offset: int) -> float:
    """The offset in ``partition`` where the epoch of the record at ``offset`` ends (its next
    threshold), or infinity when that epoch is the latest for this partition."""
    for entry in history.active_epochs:
        if entry.from_partitions is not None and partition < entry.from_partitions:
            threshold = entry.thresholds[partition]
            if threshold > offset:
                return threshold
    return math.inf


def spans(messages: Iterable[Message]) -> str:
    """Per partition, the first and last offset of ``messages`` and how many there were."""
    found: dict[tuple[Any, Any], list[int]] = {}
    for message in messages:
        if message.error() is None:
            offset: int = message.offset()  # type: ignore[assignment]
            span = found.setdefault((message.topic(), message.partition()), [offset, offset, 0])
            span[1], span[2] = offset, span[2] + 1
    return " ".join(f"{t}[{p}]@{a}-{b}({n})" for (t, p), (a, b, n) in found.items())
