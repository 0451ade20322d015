# GatedConsumer is over 450 lines on purpose for now: its rules already live in ordo.epochs (the
# gate, placement, progress); what is left is the one consumer loop.
"""GatedConsumer: a confluent-kafka Consumer that never hands out a key's records out of order
across a partition expansion (KIP-253; docs/architecture.md).

A record of a new epoch is delivered only once every partition its key could have been in before
is consumed by the group up to where that epoch began (its threshold). Until then its partition
is paused and the records fetched for it are kept, while other partitions flow; a thread of its
own fetches the group's committed offsets of the partitions it waits for, and ``consume()``
resumes the partition when the latest of them opens the gate (``ordo.epochs.consumer_gate``).

A record a producer placed by an old partition count after its partition's threshold (misplaced,
``ordo.epochs.placement``) is never delivered as if in order: by default ``consume()`` delivers
what came before it, the next call raises MisplacedRecordError carrying it, and the call after
that goes on after it (``on_misplaced`` hands such records to a callable instead, or delivers
them).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from ._clients import assign_known, committed_reads, fast_refill, logged
from .control_topics import DEFAULT_EPOCH_TOPIC
from .epochs import Gate
from .epochs.consumer_gate import (
    UNKNOWN_PARTITION_GRACE,
    ConsumerGate,
    OnMisplaced,
    misplaced_message,
    misplaced_policy,
    see_new_partitions,
    spans,
)
from .epochs.log import EpochLog
from .epochs.processed import MARKER_CHECK_INTERVAL, advances, passed
from .errors import ConfigError, MisplacedRecordError, OffsetStoreError
from .kafka_group_protocol import group_protocol
from .topic_partition import TP

__all__ = ["UNKNOWN_PARTITION_GRACE", "GatedConsumer"]

_log = logging.getLogger(__name__)


class GatedConsumer:
    """Consume ``topics`` with the ordering gate. Offsets of records handed out are stored when
    the next ``poll``/``consume`` is called (the record counts as processed then) and committed by
    librdkafka's auto-commit, or by ``commit()``; with ``enable.auto.offset.store=false`` only the
    application's ``store_offsets``/``commit(message=..., offsets=...)`` count records processed.
    ``assignment`` assigns partitions by hand instead of subscribing (the group's committed
    offsets still open gates).

    ``on_misplaced``: what to do with a misplaced record (a keyed record a producer placed by an
    old partition count after its partition's threshold, whose key's order no reader can keep).
    ``"raise"`` (the default): ``consume()`` hands out what came before it, the next call raises
    MisplacedRecordError carrying it (with any misplaced records right after it), and the call
    after that goes on after them; they count as processed then, like records handed out. A
    callable is given each call's misplaced records (a list, before the call returns the others)
    instead of delivering them; if it raises, the call raises that and nothing of the call is
    handed out (it is offered again). ``"deliver"`` delivers them, for topics whose keyed
    records are not placed by murmur2 (round-robin or explicit producers). Whatever the policy,
    each is said in a WARNING log line and counted in ``ordo_gate_misplaced_records_total``.

    It reads committed records only (``isolation.level=read_uncommitted`` is a ConfigError): a
    producer fenced at an expansion leaves an aborted transaction of records placed by the old
    partition count, which read_committed readers never see.

    It stands in for a ``confluent_kafka.Consumer``: ``assignment``, ``position``, ``committed``,
    ``store_offsets``, ``seek``, ``pause``/``resume``, ``consumer_group_metadata`` and ``commit``
    take the same arguments, each with the gate's meaning where it has one (see each)."""

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
        on_misplaced: OnMisplaced = "raise",
    ) -> None:
        policy = misplaced_policy(on_misplaced, "GatedConsumer")
        self._on_misplaced = on_misplaced
        if "group.id" not in config:
            raise ConfigError("GatedConsumer needs a group.id: gates read the group's committed offsets")
        self.topics = list(topics)
        if not self.topics:
            raise ConfigError("GatedConsumer needs at least one topic")
        group_protocol(config)  # refuses classic settings in a KIP-848 member, saying which
        config = committed_reads(config, "GatedConsumer", "read with a plain Consumer")
        # the application stores offsets itself (store_offsets) if it says so; else handing a
        # record out and being called again counts it processed
        self._auto_store = str(config.get("enable.auto.offset.store", True)).lower() not in ("false", "0")
        self._consumer = Consumer(fast_refill(logged({**config, "enable.auto.offset.store": False})))
        # With auto-commit, a gate of another member waits for this one's commit: passing a
        # threshold commits at once instead of up to auto.commit.interval.ms (5 s) later. With
        # auto-commit off the application's commits open gates, and commit when it chooses.
        self._commit_on_threshold = str(config.get("enable.auto.commit", True)).lower() not in ("false", "0")
        self._ready: deque[Message] = deque()  # admitted from a buffer, not yet handed out
        self._processed: dict[TP, int] = {}  # next offset to process, per partition we processed
        self._revoked_now: set[TP] = set()  # revoked during this consume()'s fetch
        self._pending_store: dict[TP, int] = {}  # handed out by the last consume, stored by the next
        self._handed: dict[TP, int] = {}  # per partition, the offset after the last record handed out
        self._user_paused: set[TP] = set()  # paused by the application: a gate does not resume them
        self._next_skip_check = 0.0
        self._user_assign, self._user_revoke = on_assign, on_revoke
        # Every pause, resume, assignment change, offset stored and batch fetched, at DEBUG: what
        # it takes to place a record that was never handed out (ORDO_SCENARIO_DEBUG turns it on).
        self._trace = _log.isEnabledFor(logging.DEBUG)
        assigned = list(assignment) if assignment is not None else []
        try:
            self._gate = ConsumerGate(
                config,
                self.topics,
                epoch_topic=epoch_topic,
                epoch_log=epoch_log,
                progress=self._processed,
                pause=lambda tp: self._consumer.pause([TopicPartition(*tp)]),
                resume=self._gate_resumes,
                subscribed=assignment is None,
                named=set(self.topics) | {tp.topic for tp in assigned},
                min_backoff=min_backoff,
                max_backoff=max_backoff,
                unknown_grace=UNKNOWN_PARTITION_GRACE,
                misplaced=policy,
            )
        except ConfigError:
            self._consumer.close()
            raise
        if assignment is not None:  # manual assignment: no group membership; commits still count
            assign_known(self._consumer, assigned)
        else:
            self._consumer.subscribe(
                self.topics, on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
            )

    @property
    def gate_waits(self) -> list[float]:
        """Seconds each closed gate held its partition."""
        return self._gate.gate_waits

    # -- consuming ---------------------------------------------------------------------------

    def poll(self, timeout: float = 1.0) -> Message | None:
        """The next admissible record (or an error event), or None after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            batch = self.consume(1, max(0.0, deadline - time.monotonic()))
            if batch or time.monotonic() >= deadline:
                return batch[0] if batch else None

    def consume(self, num_messages: int = 1, timeout: float = 1.0) -> list[Message]:
        """Up to ``num_messages`` admissible records. Raises MisplacedRecordError for misplaced
        records (``on_misplaced``, above)."""
        gate = self._gate
        if gate.grown.is_set():
            see_new_partitions(self._consumer, self.topics, gate.grown)
        self._store_processed()
        if gate.holding:
            self._ready.extend(gate.review())
        admitted: list[Message] = []
        handed: dict[TP, int] = {}  # per partition, the last offset handed out by this call
        while self._ready and len(admitted) < num_messages:
            message = self._ready.popleft()
            admitted.append(message)
            if message.error() is None:
                where, offset = _position(message)
                handed[where] = offset
        if len(admitted) < num_messages:
            # held gates are looked at again once the group's next progress snapshot may be in
            wait = 0.0 if admitted else min(timeout, gate.wait_cap()) if gate.holding else timeout
            self._revoked_now = set()
            fetched = self._consumer.consume(num_messages - len(admitted), wait)  # may revoke
            if self._revoked_now:
                # records taken from the buffer above belong to partitions gone meanwhile: their
                # offsets could no longer be committed, so the next owner would process them too
                gone = self._revoked_now
                admitted = [m for m in admitted if m.error() is not None or _position(m)[0] not in gone]
                handed = {tp: offset for tp, offset in handed.items() if tp not in gone}
            if self._trace and fetched:
                _log.debug("fetched %s", spans(fetched))
            admitted += gate.admit(fetched, handed)
        raised: list[Message] = []
        if gate.holds_misplaced:
            admitted, raised, handed = self._sort_out_misplaced(admitted, handed)
        for tp, offset in handed.items():
            self._handed[tp] = max(self._handed.get(tp, 0), offset + 1)
        if self._auto_store:
            self._pending_store = handed
        if raised:
            found = gate.misplacements(raised)
            gate.settle_misplaced(raised)
            raise MisplacedRecordError(misplaced_message(found, "consume()"), raised)
        return admitted

    def _sort_out_misplaced(
        self, admitted: list[Message], handed: dict[TP, int]
    ) -> tuple[list[Message], list[Message], dict[TP, int]]:
        """Apply ``on_misplaced`` to the misplaced records among ``admitted``: (what this call
        returns, what it raises, the last offset handed out per partition, those included).
        What is not handed out now goes back to the front of ``_ready``, in order."""
        gate = self._gate
        flags = [gate.is_misplaced(m) for m in admitted]
        if not any(flags):
            return admitted, [], handed
        raised: list[Message] = []
        if callable(self._on_misplaced):
            found = [m for m, flag in zip(admitted, flags, strict=True) if flag]
            try:
                self._on_misplaced(found)
            except BaseException:
                self._ready.extendleft(reversed(admitted))  # offered again, with what they came with
                raise
            gate.settle_misplaced(found)
            out = [m for m, flag in zip(admitted, flags, strict=True) if not flag]
            gone = admitted
        else:  # raise: what came before them now, them in the next call
            first = flags.index(True)
            end = first
            if first == 0:
                while end < len(flags) and flags[end]:
                    end += 1
                raised = admitted[:end]
            out = admitted[:first]
            self._ready.extendleft(reversed(admitted[end:]))
            gone = out + raised
        handed = {}
        for message in gone:
            if message.error() is None:
                where, offset = _position(message)
                handed[where] = offset
        return out, raised, handed

    def commit(
        self,
        message: Message | None = None,
        offsets: list[TopicPartition] | None = None,
        asynchronous: bool = False,
    ) -> list[TopicPartition] | None:
        """Commit everything processed so far (``message``: up to that record; ``offsets``: those,
        each the next offset to read). An offset past what the gate handed out raises
        OffsetStoreError, nothing committed. Synchronous by default, unlike confluent-kafka's."""
        if message is not None or offsets is not None:
            explicit = self._checked(message, offsets)
            self._mark_processed(explicit)
            return self._commit(explicit, asynchronous)
        self._store_processed()
        try:
            return self._commit(None, asynchronous)
        except KafkaException as error:  # nothing stored yet is not a failure
            if "NO_OFFSET" not in str(error):
                raise
        return None

    def _commit(
        self, offsets: list[TopicPartition] | None, asynchronous: bool
    ) -> list[TopicPartition] | None:
        """confluent-kafka's commit, whose stubs want each argument's literal kind."""
        if asynchronous:
            if offsets is None:
                self._consumer.commit(asynchronous=True)
            else:
                self._consumer.commit(offsets=offsets, asynchronous=True)
            return None
        if offsets is None:
            return self._consumer.commit(asynchronous=False)
        return self._consumer.commit(offsets=offsets, asynchronous=False)

    def store_offsets(
        self, message: Message | None = None, offsets: list[TopicPartition] | None = None
    ) -> None:
        """Count records processed up to ``message`` (or to each of ``offsets``, the next offset
        to read), for the gates and for the next commit. An offset past what the gate handed out
        of its partition (a record held behind a gate, or not fetched yet) raises
        OffsetStoreError; nothing is stored."""
        stored = self._checked(message, offsets)
        self._mark_processed(stored)
        self._consumer.store_offsets(offsets=stored)

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The offset of the next record each partition will hand out: a record held behind a
        gate or fetched and waiting comes before librdkafka's fetch position."""
        waiting = self._waiting()
        now = self._consumer.position(partitions)
        return [
            TopicPartition(
                tp.topic, tp.partition, min(tp.offset, waiting.get((tp.topic, tp.partition), tp.offset))
            )
            if tp.offset >= 0
            else tp
            for tp in now
        ]

    def seek(self, partition: TopicPartition) -> None:
        """Read ``partition`` from its offset next: what was fetched and not handed out is
        dropped (and a gate held there let go); the records read again meet the gate again. A seek
        forward counts the records it skips as processed for the gates: they will never be
        handed out."""
        tp = (partition.topic, partition.partition)
        held = self._gate.drop([tp])
        self._ready = deque(m for m in self._ready if m.error() is not None or _position(m)[0] != tp)
        self._consumer.seek(partition)
        if held and tp not in self._user_paused:
            self._consumer.resume([partition])

    def pause(self, partitions: list[TopicPartition]) -> None:
        """Stop fetching ``partitions`` until ``resume``; a gate that opens meanwhile does not
        resume them."""
        self._user_paused |= {(tp.topic, tp.partition) for tp in partitions}
        self._consumer.pause(partitions)

    def resume(self, partitions: list[TopicPartition]) -> None:
        """Fetch ``partitions`` again, except those a closed gate holds (they resume when it opens)."""
        self._user_paused -= {(tp.topic, tp.partition) for tp in partitions}
        free = [tp for tp in partitions if not self._gate.is_held((tp.topic, tp.partition))]
        if free:
            self._consumer.resume(free)

    def assignment(self) -> list[TopicPartition]:
        return self._consumer.assignment()

    def committed(
        self, partitions: list[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """The group's committed offsets (what other members' gates wait for)."""
        if timeout is None:
            return self._consumer.committed(partitions)
        return self._consumer.committed(partitions, timeout=timeout)

    def consumer_group_metadata(self) -> Any:
        """For ``send_offsets_to_transaction`` (a consume-transform-produce loop)."""
        return self._consumer.consumer_group_metadata()

    def closed_gates(self) -> dict[TP, Gate]:
        """Partitions held back now, with what each is waiting for."""
        return self._gate.closed_gates()

    @property
    def raw(self) -> Consumer:
        return self._consumer

    def close(self) -> None:
        self._store_processed()
        self._consumer.close()
        self._gate.close()

    def __enter__(self) -> GatedConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what was processed --------------------------------------------------------------------

    def _gate_resumes(self, tp: TP) -> None:
        if tp not in self._user_paused:
            self._consumer.resume([TopicPartition(*tp)])

    def _waiting(self) -> dict[TP, int]:
        """Per partition, the first record fetched but not handed out (held, or admitted and
        waiting)."""
        waiting = self._gate.held_offsets()
        for message in self._ready:
            if message.error() is None:
                where, offset = _position(message)
                waiting[where] = min(offset, waiting.get(where, offset))
        return waiting

    def _checked(self, message: Message | None, offsets: list[TopicPartition] | None) -> list[TopicPartition]:
        """The offsets to store (a message's: its offset + 1), each checked against what the gate
        handed out of its partition; OffsetStoreError naming the first that goes past it."""
        if (message is None) == (offsets is None):
            raise OffsetStoreError("give either message= or offsets=, not both or neither")
        if message is not None:
            where, offset = _position(message)
            offsets = [TopicPartition(where[0], where[1], offset + 1)]
        assert offsets is not None
        waiting = self._waiting()
        for tp in offsets:
            key = (tp.topic, tp.partition)
            limit = min(self._handed.get(key, 0), waiting.get(key, self._handed.get(key, 0)))
            if tp.offset > max(limit, self._processed.get(key, 0)):
                held = f", the record at {waiting[key]} is held behind a gate" if key in waiting else ""
                raise OffsetStoreError(
                    f"{tp.topic}[{tp.partition}] offset {tp.offset} is past what was handed out "
                    f"({limit}{held}): storing it would count records never handed out as processed; "
                    "nothing was stored"
                )
        return offsets

    def _mark_processed(self, offsets: list[TopicPartition]) -> None:
        advanced = self._advance(((tp.topic, tp.partition), tp.offset) for tp in offsets)
        if advanced:
            self._progressed(advanced)

    def _advance(self, offsets: Iterable[tuple[TP, int]]) -> list[tuple[TP, int, int]]:
        """Processed offsets moved forward (ordo.epochs.processed): (partition, from, to)."""
        advanced = advances(self._processed, offsets)
        self._processed.update((tp, to) for tp, _, to in advanced)
        return advanced

    def _store_processed(self) -> None:
        if self._pending_store:
            self._store_handed_out()
        now = time.monotonic()
        if now >= self._next_skip_check:
            self._next_skip_check = now + MARKER_CHECK_INTERVAL
            self._store_skipped()

    def _progressed(self, advanced: list[tuple[TP, int, int]]) -> None:
        """After storing offsets (partition, from, to): if one passed a threshold, a gate may be
        waiting for it: a held one of this consumer's is looked at again, and another member's
        (or this one's after a rebalance) waits for the commit, made now."""
        if not (self._commit_on_threshold or self._gate.holding) or not self._gate.progressed(advanced):
            return
        if self._commit_on_threshold:
            try:
                self._consumer.commit(asynchronous=True)
            except KafkaException as error:  # auto-commit still commits them, later
                _log.debug("commit at a threshold not sent: %s", error)

    def _store_skipped(self) -> None:
        """Count as processed what the consumer passed without handing out: the transaction
        markers (and aborted records) after a partition's last record (why:
        ordo.epochs.processed)."""
        # Everything below a partition's first record not yet handed out (held behind a gate,
        # or admitted and waiting in _ready) was processed or skipped; without one, everything
        # below the consumer's position was.
        waiting = self._waiting()
        if not self._auto_store:
            # only what the application stored counts: markers are skipped only past a partition
            # whose every handed-out record it stored
            for key, handed in self._handed.items():
                if self._processed.get(key, 0) < handed:
                    waiting[key] = min(waiting.get(key, handed), self._processed.get(key, 0))
        try:
            positions = self._consumer.position(self._consumer.assignment())
        except KafkaException:
            return  # not now (e.g. mid-rebalance); the next check catches up
        done = passed((((tp.topic, tp.partition), tp.offset) for tp in positions), waiting)
        advanced = self._advance(done.items())
        if advanced:
            skipped = [TopicPartition(topic, partition, to) for (topic, partition), _, to in advanced]
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
            _log.debug("revoked %s; held %s", revoked, list(self._gate.closed_gates()))
        if self._pending_store:
            self._store_handed_out()
        gone = {(tp.topic, tp.partition) for tp in partitions}
        held = self._gate.drop(gone)
        if held:  # see _assigned: never hand a paused partition back
            consumer.resume([TopicPartition(*tp) for tp in held])
        self._revoked_now |= gone
        self._ready = deque(m for m in self._ready if _position(m)[0] not in gone)
        if self._user_revoke is not None:
            self._user_revoke(consumer, partitions)


def _position(message: Message) -> tuple[TP, int]:
    """(topic, partition), offset of a data message (never None for those)."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    assert topic is not None and partition is not None and offset is not None
    return (topic, partition), offset
