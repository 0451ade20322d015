# AsyncConsumer is over 450 lines on purpose for now: its scheduler, commits, handoff and
# revocations are modules of their own; the pure flow of ownership and pacing is issue 46.
"""AsyncConsumer: KIP-983's consumer API over confluent-kafka (docs/async_consumer.md).

confluent-kafka runs rebalance callbacks inside ``consume()`` and completes a revocation when the
callback returns. So librdkafka is polled on a thread of the SDK (the *fetcher*), which buffers
records ahead: it only puts each fetched batch in a ``Handoff``, and the user's ``poll()`` sorts
them into the scheduler itself, so a poll that needs records never waits for the fetcher's Python
work (``handoff.py``). When partitions are revoked, the fetcher waits inside the callback until the user's
work on them is finished (KIP-983's two-step revocation, ``revocations.py``) or their deadline
passes (then they are lost), while the user's ``poll()`` keeps handing out buffered records of the
partitions that stay. Every confluent-kafka call is made on the fetcher thread.

With ``gate=True`` records are also held at the ordering gate of KIP-253 (``ordo.epochs.
consumer_gate``, GatedConsumer's): a moved key's records in a new partition wait until the old
partitions' records up to the epoch's thresholds are *completed* (done by the workers, in order:
the committed positions), not merely handed out. A record a producer placed by an old partition
count after its partition's threshold (misplaced, ``ordo.epochs.placement``) is not handed out as
if in order: ``poll()`` raises MisplacedRecordError with it, or hands it to ``on_misplaced``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import groupby, repeat
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, Message, TopicPartition

from .. import metrics
from .._clients import committed_reads, fast_refill
from ..control_topics import DEFAULT_EPOCH_TOPIC
from ..epochs import Gate
from ..epochs.consumer_gate import (
    ConsumerGate,
    OnMisplaced,
    misplaced_message,
    misplaced_policy,
    see_new_partitions,
)
from ..epochs.log import EpochLog
from ..epochs.placement import Misplacement
from ..epochs.processed import MARKER_CHECK_INTERVAL, advances, passed
from ..errors import ConfigError, ConsumerClosedError, MisplacedRecordError
from ..kafka_group_protocol import with_classic_defaults
from ..topic_partition import TP
from .commits import CommitPolicy, to_commit
from .handoff import Handoff
from .offsets import OffsetTracker
from .revocations import Revocations
from .scheduler import ORDERINGS, Ordering, Scheduler

__all__ = ["TP", "AsyncConsumer", "Batch", "Listener"]

_log = logging.getLogger(__name__)
WAKE_EVERY = 0.02
"""Seconds of the workers' progress a waiting unordered poll lets pass before it hands out more."""
PAUSE_AFTER = 0.05
"""Seconds a full buffer holds the fetcher (nothing fetched, nothing paused) while poll() drains it
to three quarters, before every partition is paused: a pause drops librdkafka's prefetched records
and its resume waits out the fetch long-poll in flight, so a consumer that keeps up never pays it."""
HOLD_STEP = 0.005
"""Seconds between the fetcher's looks at a full buffer it holds."""
Listener = Callable[[frozenset[TP]], None]
"""A rebalance callback: ``on_assign``, ``on_revoke`` or ``on_lost``, given the partitions."""


@dataclass(frozen=True, slots=True)
class Batch:
    """One poll's result (KIP-983 Variant 1: records and rebalance news together)."""

    records: list[Message]
    to_be_revoked: frozenset[TP] = frozenset()
    """Being revoked: no more records of them come; their revocation completes at the next poll
    unless ``delay_revoke`` is called for them before it."""
    lost: frozenset[TP] = frozenset()
    """Lost since the last poll: stop their work, it will not be committed."""
    errors: list[KafkaError] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.records or self.to_be_revoked or self.lost or self.errors)


class _Owned:
    """A partition this consumer owns: its offsets and whether it is being revoked, paused or
    held at the ordering gate."""

    __slots__ = ("held", "paused", "revoking", "tracker")

    def __init__(self) -> None:
        self.tracker = OffsetTracker()
        self.revoking = False
        self.paused = False
        self.held = False


class AsyncConsumer:
    """Consume ``topics`` for asynchronous processing (KIP-983).

    ``poll()`` returns a ``Batch``; call ``done(record)`` when a record is processed (from any
    thread), or ``done_many(records)`` for several processed together. ``ordering``:
    ``partition`` (a partition's records one at a time, in order), ``key`` (in order per key,
    keys in parallel), ``unordered``. At most ``max_in_flight`` records are
    handed out and not done; at most about ``max_buffered`` more are fetched ahead (partitions
    are paused beyond that, nothing is dropped). The buffer is what keeps ``poll()`` delivering
    while a revocation waits: size it as docs/async_consumer.md explains.

    ``gate``: hold records at KIP-253's ordering gate, as GatedConsumer does, reading the epoch
    log ``epoch_topic`` (or ``epoch_log``): a moved key's records wait until its older records
    are done, whichever member processes them (``closed_gates()`` says what waits for what).
    Gated, it reads committed records only (``isolation.level=read_uncommitted`` is a
    ConfigError): a producer fenced at an expansion leaves an aborted transaction of records
    placed by the old partition count.
    ``on_misplaced`` (with ``gate``): what to do with a misplaced record (a keyed record a
    producer placed by an old partition count after its partition's threshold, whose key's order
    no reader can keep). Such a record takes its turn as any other (its lane: after the records
    before it, before those after it), but is not handed out: ``"raise"`` (the default): the next
    ``poll()`` raises MisplacedRecordError carrying it (and the others whose turn came in the
    same poll), and the ``poll()`` after that counts them done and goes on (a consumer that stops
    there reads them again). A callable is given them (a list, on the thread that calls
    ``poll()``, at the start of the next one) instead, and they count done when it returns; if it
    raises, that ``poll()`` raises it and offers them again next time.
    ``"deliver"`` hands them out as any record, for topics whose keyed records are not placed by
    murmur2 (round-robin or explicit producers). Each is said in a WARNING log line and counted
    in ``ordo_gate_misplaced_records_total``, whatever the policy.

    ``on_assign``, ``on_revoke``, ``on_lost`` observe the rebalances, each called with a frozenset
    of (topic, partition), never empty, on the SDK's fetcher thread: ``on_assign`` before any
    record of them is handed out; ``on_revoke`` once a revocation completed and the partitions'
    positions are committed, before another member can get them; ``on_lost`` when partitions are
    lost (``revoke_timeout`` passed, session expired, member fenced): their work will not be
    committed. The fetcher waits for them: keep them short; they may call this consumer's methods
    except ``poll`` and ``close``. An exception from one fails the consumer: the next ``poll()``
    raises ``ConsumerClosedError`` from it.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        topics: Iterable[str],
        *,
        ordering: Ordering = "key",
        max_in_flight: int = 10_000,
        max_buffered: int = 20_000,
        commit_interval: float = 1.0,
        commit_every: int = 10_000,
        revoke_timeout: float = 60.0,
        fetch_batch: int = 1_000,
        on_assign: Listener | None = None,
        on_revoke: Listener | None = None,
        on_lost: Listener | None = None,
        gate: bool = False,
        epoch_topic: str = DEFAULT_EPOCH_TOPIC,
        epoch_log: EpochLog | None = None,
        on_misplaced: OnMisplaced = "raise",
    ) -> None:
        self.topics = list(topics)
        _check(config, self.topics, ordering, max_in_flight, max_buffered, revoke_timeout)
        if gate:
            config = committed_reads(config, "AsyncConsumer(gate=True)", "read with gate=False")
        policy = misplaced_policy(on_misplaced, "AsyncConsumer")
        if not gate and on_misplaced != "raise":
            raise ConfigError(
                "AsyncConsumer: on_misplaced needs gate=True: without the gate no record is judged"
            )
        self._on_misplaced = on_misplaced
        # gated: misplaced records placed in the scheduler, by id, with their topic and what is
        # wrong; those whose turn came (taken, in flight) until poll() raises them or hands them
        # over; and those the last poll raised, done at the next one
        self._flagged: dict[int, tuple[Message, str, Misplacement]] = {}
        self._misplaced: list[tuple[Message, str, Misplacement]] = []
        self._raised: list[Message] = []
        for name, listener in (("on_assign", on_assign), ("on_revoke", on_revoke), ("on_lost", on_lost)):
            if listener is not None and not callable(listener):
                raise ConfigError(
                    f"{name} must be a callable taking a frozenset of (topic, partition), got {listener!r}"
                )
        self._listen_assign, self._listen_revoke, self._listen_lost = on_assign, on_revoke, on_lost
        self.ordering: Ordering = ordering
        self._ordered = ordering != "unordered"
        self.max_in_flight = max_in_flight
        self._group_id = str(config["group.id"])
        # unordered: a waiting poll is woken once this many records are in flight or fewer (_pace)
        self._wake_at = max_in_flight * 3 // 4
        self._handed, self._handed_since = 0, time.monotonic()  # records handed out since, for _pace
        self.max_buffered = max_buffered
        self.revoke_timeout = revoke_timeout
        self._fetch_batch = fetch_batch
        self._user_on_commit: Callable[..., None] | None = config.get("on_commit")
        # gated: per partition, the offset below which every record is done; kept after the
        # partition goes (done is done: it still counts for gates)
        self._completed: dict[TP, int] = {}
        self._gate: ConsumerGate | None = None
        if gate:  # first: a log it cannot read refuses the consumer before it joins the group
            self._gate = ConsumerGate(
                config,
                self.topics,
                epoch_topic=epoch_topic,
                epoch_log=epoch_log,
                progress=self._completed,
                pause=self._hold,
                resume=self._release,
                subscribed=True,
                named=set(self.topics),
                on_snapshot=self._gate_news,
                misplaced=policy,
            )
        self._next_skip_check = 0.0
        try:
            self._consumer = Consumer(
                fast_refill(
                    {
                        # a resumed partition waits for the fetch long-poll in flight: keep it short
                        "fetch.wait.max.ms": 100,
                        # incremental rebalances (a KIP-848 group's are incremental already)
                        **with_classic_defaults(config, partition_assignment_strategy="cooperative-sticky"),
                        "enable.auto.commit": False,
                        "enable.auto.offset.store": False,
                        "on_commit": self._on_commit,
                    }
                )
            )
        except Exception:
            if self._gate is not None:
                self._gate.close()
            raise
        self._lock = threading.Lock()  # not reentrant: cheaper, never nested
        self._cond = threading.Condition(self._lock)
        self._owned: dict[TP, _Owned] = {}
        self._scheduler: Scheduler[TP, Message] = Scheduler(ordering)
        self._fetched: Handoff[Message] = Handoff()  # fetched, not yet in the scheduler
        # records handed out and not done, by id(): cheaper than by (topic, partition, offset), and
        # safe, as a live record's id is unique and the user holds the record it calls done() with.
        # The record alone, not with its partition: a tuple per record would live as long as its
        # processing, and every such object brings the garbage collector's next full walk closer
        self._in_flight: dict[int, Message] = {}
        # done() only queues the record (deque appends are atomic): taking the lock per record
        # made the workers queue up behind poll and the fetcher. Whoever holds the lock next
        # settles the queue before reading offsets or what is in flight.
        self._done: deque[Message] = deque()
        self._revocations: Revocations[TP] = Revocations()
        self._snapshots: dict[TP, int | None] = {}  # positions of completed revocations, to commit
        self._policy = CommitPolicy(commit_interval, commit_every, time.monotonic())
        self._committed: dict[TP, int] = {}
        self._errors: list[KafkaError] = []
        self._failure: BaseException | None = None
        self._full_since: float | None = None  # when the buffer filled, while it stays above 3/4
        self._poll_waiting = False
        self._poll_starved = False  # waiting with room to hand out but nothing buffered
        self._closing = False
        self._stop = threading.Event()
        self.revocation_waits: list[float] = []
        """Seconds each revocation held the fetcher (request -> completed or lost)."""
        self._consumer.subscribe(
            self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        self._fetcher = threading.Thread(target=self._run, name="ordo-async-consumer", daemon=True)
        self._fetcher.start()

    # -- the user's side ---------------------------------------------------------------------

    def poll(self, timeout: float = 1.0, max_records: int = 1_000) -> Batch:
        """Records that may be processed now (per the ordering mode and ``max_in_flight``), with
        the partitions being revoked and those lost. Returns early when a revocation starts.
        Gated: raises MisplacedRecordError, or calls ``on_misplaced``, for misplaced records."""
        self._hand_over_misplaced()
        deadline = time.monotonic() + timeout
        with self._lock:
            self._check_usable()
            if self._revocations.pending:  # _forget settles the done() calls first
                self._complete(self._revocations.start_poll())
            while True:
                self._settle()
                if self._gate is not None and self._gate.holding:
                    self._review_gates()
                room = min(max_records, self.max_in_flight - len(self._in_flight))
                taken = self._take(room) if room > 0 else []
                if taken or self._errors or self._revocations.has_news():
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                # sort what was fetched now, while the workers run, not once woken: by then the
                # workers may have run out of records, and they would wait for it
                self._absorb()
                self._poll_waiting, self._poll_starved = True, room > 0
                if self._done or self._fetched:  # came before the flag could be seen: look again
                    self._poll_waiting = self._poll_starved = False
                    continue
                self._cond.wait(left)
                self._poll_waiting = self._poll_starved = False
                self._check_usable()
            in_flight = self._in_flight
            records: list[Message] = []
            for _, run in taken:  # a run of one partition at a time: the loops run in C
                in_flight.update(zip(map(id, run), run, strict=True))
                records.extend(run)
            if self._flagged and records:
                records = self._set_aside(records)
            if records and not self._ordered:
                self._pace(len(records))
            to_be_revoked, lost = self._revocations.report()
            errors, self._errors = self._errors, []
            metrics.async_in_flight(self._group_id, len(in_flight))
        batch = Batch(records, to_be_revoked, lost, errors)
        if self._misplaced and not batch:  # all this poll took was misplaced: their turn now
            self._hand_over_misplaced()
        return batch

    def _set_aside(self, records: list[Message]) -> list[Message]:
        """The taken ``records`` but the misplaced ones, which stay in flight (their lanes
        busy) until ``_hand_over_misplaced`` (with the lock held)."""
        flagged = self._flagged
        found = [flagged.pop(id(m)) for m in records if id(m) in flagged]
        if not found:
            return records
        self._misplaced += found
        aside = {id(m) for m, _, _ in found}
        return [m for m in records if id(m) not in aside]

    def _hand_over_misplaced(self) -> None:
        """Count done the misplaced records the last poll raised (the application went on);
        then raise the ones taken since, or hand them to ``on_misplaced`` (done once it
        returns; offered again if it raises). Done as records handed out are: their lanes go on."""
        if self._raised:
            raised, self._raised = self._raised, []
            self.done_many(raised)
        if not self._misplaced:
            return
        with self._lock:
            self._check_usable()
            found, self._misplaced = self._misplaced, []
        records = [message for message, _, _ in found]
        if not callable(self._on_misplaced):
            self._raised = records
            raise MisplacedRecordError(
                misplaced_message([(topic, what) for _, topic, what in found], "poll()"), records
            )
        try:
            self._on_misplaced(records)
        except BaseException:
            with self._lock:  # offered again, unless their partition went meanwhile
                self._misplaced[:0] = [f for f in found if id(f[0]) in self._in_flight]
            raise
        self.done_many(records)

    def done(self, record: Message) -> None:
        """``record`` is processed. Records of lost or revoked partitions are ignored."""
        if id(record) not in self._in_flight:
            return  # not handed out by this consumer's current ownership (stale, repeated)
        self._done.append(record)
        self._wake()

    def done_many(self, records: Iterable[Message]) -> None:
        """``done`` for each of ``records``: one call for records processed together (a chunk of a
        batch handed to one task), cheaper than a call per record. The commit guarantee is the
        same: a partition's position passes only records done, whatever the order of the calls."""
        in_flight = self._in_flight
        mine = [record for record in records if id(record) in in_flight]
        if not mine:
            return
        self._done.extend(mine)  # atomic, as append is
        self._settle_and_wake()

    def _wake(self) -> None:
        """Wake a waiting poll when it may find work (``_poll_may_take``)."""
        if self._poll_may_take():
            # one wake-up is enough: the workers finishing meanwhile need not queue for the lock
            # (the waiting poll holds it from raising the flag until it waits, so this notify
            # cannot come between the two)
            self._poll_waiting = False
            with self._lock:
                self._cond.notify_all()

    def _settle_and_wake(self) -> None:
        """``_wake`` after settling the queued done() calls if the lock is free (never waiting
        for it: workers would queue up behind poll and the fetcher). A chunk's worker settles it
        while the others still run: a woken poll then only hands out, where it settled the whole
        max_in_flight after the workers had run out of records (docs/performance.md)."""
        if not self._lock.acquire(blocking=False):
            self._wake()
            return
        try:
            self._settle()
            if self._poll_may_take():
                self._poll_waiting = False
                self._cond.notify_all()
        finally:
            self._lock.release()

    def _pace(self, handed: int) -> None:
        """Unordered mode: how many records must be done before a waiting poll is woken: about what
        the workers finish in ``WAKE_EVERY``, between a sixteenth and a quarter of max_in_flight.
        The user hands each poll's records to its workers in one burst, holding the GIL meanwhile:
        workers that wait for it after every record (1 ms of work each) lost 4-10% of their rate
        to bursts of a quarter, while workers with no work lost 15% to wake-ups every sixteenth."""
        now = time.monotonic()
        self._handed += handed
        elapsed = now - self._handed_since
        if elapsed < 5 * WAKE_EVERY:  # the rate of one poll alone swings with the workers' luck
            return
        rate = self._handed / elapsed
        self._handed, self._handed_since = 0, now
        room = min(self.max_in_flight // 4, max(self.max_in_flight // 16, int(rate * WAKE_EVERY), 1))
        self._wake_at = self.max_in_flight - room

    def _poll_may_take(self) -> bool:
        """A waiting poll would hand out records now: some are buffered, and it has room (it
        waited for records, or a record done may free its lane, or in the unordered mode the room
        ``_pace`` chose is free: waking it per record done would hand out batches of one)."""
        return bool(
            self._poll_waiting
            and (self._scheduler.total or self._fetched)
            and (
                self._poll_starved or self._ordered or len(self._in_flight) - len(self._done) <= self._wake_at
            )
        )

    def delay_revoke(self, partitions: Iterable[TP]) -> set[TP]:
        """Keep the revocation of ``partitions`` open one more poll: it completes at the start of
        the poll after the next one, unless delayed again. Returns those delayed: the ones being
        revoked now. The others are left out, not refused with them: lost ones (stop their work,
        it will not be committed), revocations already completed, and partitions not being
        revoked (nothing to delay). Raises TypeError for anything but (topic, partition) tuples."""
        wanted = _tps(partitions, "delay_revoke")
        with self._lock:
            return self._revocations.delay(wanted)

    def unfinished(self, partitions: Iterable[TP] | None = None) -> set[TP]:
        """Partitions (of ``partitions``, default all) with records handed out and not done, and
        partitions being revoked that still have records to hand out (gaps, see ``key`` mode)."""
        wanted = None if partitions is None else set(_tps(partitions, "unfinished"))
        with self._lock:
            self._settle()
            busy = {_tp(m) for m in self._in_flight.values()}
            busy |= {tp for tp, s in self._owned.items() if s.revoking and s.tracker.unfinished}
        return busy if wanted is None else busy & wanted

    def assignment(self) -> set[TP]:
        """Partitions owned now, including those being revoked."""
        with self._lock:
            return set(self._owned)

    def closed_gates(self) -> dict[TP, Gate]:
        """Gated: partitions held back now, with what each is waiting for."""
        if self._gate is None:
            return {}
        with self._lock:
            return self._gate.closed_gates()

    @property
    def in_flight(self) -> int:
        return max(0, len(self._in_flight) - len(self._done))  # a record done twice counts once

    @property
    def buffered(self) -> int:
        return self._scheduler.total + len(self._fetched)

    def close(self, timeout: float = 30.0) -> None:
        """Stop handing out records, wait up to ``timeout`` for the ones handed out, commit what
        is done and leave the group."""
        deadline = time.monotonic() + timeout
        with self._lock:
            if self._closing:
                return
            self._closing = True
            # misplaced records not yet raised or handed over, or raised and not gone on from, are
            # not waited for: not done, they are read again by whoever reads on
            for message in [m for m, _, _ in self._misplaced] + self._raised:
                self._in_flight.pop(id(message), None)
            while True:
                self._settle()
                if not self._in_flight or self._failure is not None:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    _log.warning("closing with %d records not done; they will be consumed again",
                                 len(self._in_flight))  # fmt: skip
                    break
                self._poll_waiting = True
                self._cond.wait(min(left, 0.1))
            self._poll_waiting = False
            self._cond.notify_all()
        self._stop.set()
        self._fetcher.join(max(1.0, deadline - time.monotonic()) + 10)

    def __enter__(self) -> AsyncConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- asyncio -----------------------------------------------------------------------------

    async def poll_async(self, timeout: float = 1.0, max_records: int = 1_000) -> Batch:
        """``poll`` without blocking the event loop (it waits on a worker thread)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.poll, timeout, max_records)

    def __aiter__(self) -> AsyncIterator[Batch]:
        return self._batches()

    async def _batches(self) -> AsyncIterator[Batch]:
        """``async for batch in consumer``: every non-empty batch until the consumer is closed."""
        while not self._closing:
            try:
                batch = await self.poll_async(0.1)
            except ConsumerClosedError:
                if self._failure is not None:
                    raise
                return
            if batch:
                yield batch

    # -- called with the lock held -----------------------------------------------------------

    def _settle(self) -> None:
        """Apply the done() calls queued since the last settle: positions move, lanes free up."""
        done = self._done
        if not done:
            return
        popleft = done.popleft  # only lock holders take; done() may append meanwhile
        records = [popleft() for _ in range(len(done))]
        scheduler, ordered = self._scheduler, self._ordered
        offsets_of: dict[TP, list[int]] = {}
        # a (topic, partition) tuple only where the partition changes: every tuple is an
        # allocation the garbage collector counts towards its next collection
        topic, partition, tp, offsets = "", -1, ("", -1), []
        # None: done twice, or its partition was revoked or lost meanwhile
        for record in map(self._in_flight.pop, map(id, records), repeat(None)):
            if record is None:
                continue
            if record.partition() != partition or record.topic() != topic:
                topic, partition = record.topic(), record.partition()  # type: ignore[assignment]
                tp = (topic, partition)
                offsets = offsets_of.setdefault(tp, [])
            offsets.append(record.offset())  # type: ignore[arg-type]  # data records have one
            if ordered:
                scheduler.release(tp, record.key())
        owned = self._owned
        for tp, offsets in offsets_of.items():
            owned[tp].tracker.done_many(offsets)
            self._policy.pending += len(offsets)
        if self._gate is not None:
            self._completed_to({tp: owned[tp].tracker.position for tp in offsets_of})

    def _take(self, room: int) -> list[tuple[TP, list[Message]]]:
        """Up to ``room`` records to hand out, in runs of one partition; fetched batches are
        sorted only when the scheduler has fewer (a woken poll hands out first)."""
        if self._scheduler.total < room:
            self._absorb()
        return self._scheduler.take_runs(room)

    def _absorb(self) -> None:
        """Sort the batches the fetcher handed over into the offset trackers and the scheduler
        (gated: those the gate admits; it holds the others)."""
        gate = self._gate
        for messages in self._fetched.take():
            # any stamp to look at, and the misplaced records (one C pass)
            headers, flagged = gate.look(messages) if gate is not None else (False, None)
            run: list[Message] = []  # a fetched batch comes in runs of one partition
            topic, partition = "", -1  # the run's, compared field by field: no tuple per record
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        self._errors.append(error)
                    continue
                if message.partition() != partition or message.topic() != topic:
                    if run:
                        self._add_run((topic, partition), run, headers, flagged)
                    topic, partition, run = message.topic(), message.partition(), []  # type: ignore[assignment]
                run.append(message)
            if run:
                self._add_run((topic, partition), run, headers, flagged)
        if gate is not None:
            gate.ask_watcher()

    def _add_run(
        self, tp: TP, run: list[Message], headers: bool = True, flagged: set[int] | None = None
    ) -> None:
        state = self._owned.get(tp)
        if state is None or state.revoking:
            return  # records fetched before a revocation are left for the next owner
        if self._gate is not None:
            admitted: list[Message] = []
            self._gate.admit_run(tp, run, admitted, {}, headers, flagged)  # the others wait at the gate
            if not admitted:
                return
            run = admitted
        self._place(tp, state, run)

    def _place(self, tp: TP, state: _Owned, run: list[Message]) -> None:
        """Records that may be handed out: into the offset tracker and the scheduler (gated: the
        misplaced ones are noted, for ``poll()`` to set aside when their turn comes)."""
        state.tracker.add_many([message.offset() for message in run])  # type: ignore[misc]
        gate = self._gate
        if gate is not None and gate.holds_misplaced:
            aside = [message for message in run if gate.is_misplaced(message)]
            if aside:
                found = gate.misplacements(aside)
                self._flagged.update(
                    (id(m), (m, tp[0], what)) for m, (_, what) in zip(aside, found, strict=True)
                )
                gate.settle_misplaced(aside)
        scheduler = self._scheduler
        if self.ordering == "key":
            for message in run:
                scheduler.add(tp, message.key(), message)
        else:
            scheduler.add_many(tp, run)

    # -- the ordering gate (gate=True), called with the lock held ---------------------------

    def _review_gates(self) -> None:
        """Records of held partitions whose gate opened: placed to be handed out, in order."""
        assert self._gate is not None
        for tp, run in groupby(self._gate.review(), key=_tp):
            state = self._owned.get(tp)
            if state is not None and not state.revoking:
                self._place(tp, state, list(run))

    def _completed_to(self, positions: Mapping[TP, int | None]) -> None:
        """This consumer's completed offsets moved: one past a threshold is committed soon (a
        gate of another member may wait for it) and may open a held gate here."""
        assert self._gate is not None
        advanced = advances(self._completed, positions.items())
        self._completed.update((tp, to) for tp, _, to in advanced)
        if advanced and self._gate.progressed(advanced):
            self._policy.urge()
            if self._poll_waiting:
                self._cond.notify_all()

    def _hold(self, tp: TP) -> None:
        state = self._owned.get(tp)
        if state is not None:
            state.held = True  # the fetcher pauses it (_service)

    def _release(self, tp: TP) -> None:
        state = self._owned.get(tp)
        if state is not None:
            state.held = False  # the fetcher resumes it when the buffer has room (_service)

    def _gate_news(self) -> None:
        """The gate's watcher has a new snapshot of the group's progress (its thread): a waiting
        poll looks at the held gates again."""
        with self._lock:
            if self._poll_waiting:
                self._cond.notify_all()

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise ConsumerClosedError(f"the AsyncConsumer failed: {self._failure}") from self._failure
        if self._closing:
            raise ConsumerClosedError("the AsyncConsumer is closed; create a new one")

    def _complete(self, partitions: Iterable[TP]) -> None:
        """Revocations completed by the user's poll: keep each position for the fetcher to
        commit, and forget the partition (later ``done`` calls for it are ignored)."""
        for tp in partitions:
            self._snapshots[tp] = self._forget(tp)
        self._cond.notify_all()

    def _forget(self, tp: TP) -> int | None:
        self._settle()  # what was done before the partition goes counts for its position
        if self._gate is not None:
            self._gate.drop([tp])
        owned = self._owned.pop(tp, None)
        self._scheduler.drop(tp)
        if self._flagged or self._misplaced:  # never handed out: the next owner reads them
            self._flagged = {k: f for k, f in self._flagged.items() if _tp(f[0]) != tp}
            self._misplaced = [f for f in self._misplaced if _tp(f[0]) != tp]
        for key in [k for k, m in self._in_flight.items() if _tp(m) == tp]:
            del self._in_flight[key]
        return owned.tracker.position if owned is not None else None

    # -- the fetcher thread ------------------------------------------------------------------

    def _run(self) -> None:
        consumer = self._consumer
        gate = self._gate
        try:
            while not self._stop.is_set():
                if gate is not None:
                    if gate.grown.is_set():  # a new epoch: its partitions are assigned now
                        see_new_partitions(consumer, self.topics, gate.grown)
                    self._pass_markers(consumer)
                if self._service(consumer):
                    self._stop.wait(HOLD_STEP)
                    continue
                # never fetch much past max_buffered (a full buffer still serves callbacks)
                room = self.max_buffered - self.buffered
                messages = consumer.consume(max(1, min(self._fetch_batch, room)), 0.05)
                if messages:
                    self._hand_over(messages)
        except BaseException as error:  # surfaced by the user's next poll()
            _log.exception("AsyncConsumer fetcher failed")
            with self._lock:
                self._failure = error
                self._cond.notify_all()
        finally:
            self._shutdown(consumer)

    def _hand_over(self, messages: list[Message]) -> None:
        """Leave a fetched batch to the next lock holder; wake a poll waiting for records (the
        poll raises its flag, then looks at the handoff, under the lock: either it sees this batch
        or this sees its flag, and the notify waits for the lock until the poll waits). A poll
        waiting for room is not woken until it has some."""
        self._fetched.put(messages)
        if self._poll_may_take():
            self._poll_waiting = False
            with self._lock:
                self._cond.notify_all()

    def _pass_markers(self, consumer: Consumer) -> None:
        """Gated: count as completed the offsets the fetch passed without a record (transaction
        markers, aborted records) in partitions whose every record is done, up to the first
        record held at a gate (why: ordo.epochs.processed)."""
        now = time.monotonic()
        if now < self._next_skip_check:
            return
        self._next_skip_check = now + MARKER_CHECK_INTERVAL
        with self._lock:
            owned = [TopicPartition(*tp) for tp, state in self._owned.items() if not state.revoking]
        if not owned:
            return
        try:
            positions = consumer.position(owned)
        except KafkaException:
            return  # not now (mid-rebalance): the next look catches up
        assert self._gate is not None
        with self._lock:
            self._absorb()  # what was fetched below those positions is in the trackers first
            self._settle()
            idle = []  # owned partitions whose every record is done
            for position in positions:
                tp = (position.topic, position.partition)
                state = self._owned.get(tp)
                if state is not None and not state.revoking and state.tracker.unfinished == 0:
                    idle.append((tp, position.offset))
            held = self._gate.held_offsets()  # fetched, not handed out: not passed
            moved: dict[TP, int | None] = {
                tp: below
                for tp, below in passed(idle, held).items()
                if self._owned[tp].tracker.advance_to(below)
            }
            if moved:
                self._completed_to(moved)

    def _service(self, consumer: Consumer) -> bool:
        """Between fetches: back-pressure, and the aggregated asynchronous commit. A full buffer
        first holds the fetcher (True: fetch nothing now) for PAUSE_AFTER; only a buffer that stays
        full pauses every partition. Above three quarters, a partition past its share is paused;
        a paused one resumes at half its share once the total is down to three quarters."""
        pause: list[TopicPartition] = []
        resume: list[TopicPartition] = []
        with self._lock:
            owned = self._owned
            # a fair share per partition, and the total: one fetch can bring a partition far past
            # its share, so a full buffer pauses every partition
            high = max(1, self.max_buffered // max(1, len(owned)))
            if len(self._fetched) >= max(high, self._fetch_batch):
                self._absorb()  # poll() is not taking them: sorted here, to pause by partition
            total = self.buffered
            low = total <= self.max_buffered * 3 // 4
            now = time.monotonic()
            if total >= self.max_buffered:
                self._full_since = self._full_since or now
            elif low:
                self._full_since = None
            holding = self._full_since is not None and now - self._full_since < PAUSE_AFTER
            stop_all = self._full_since is not None and not holding
            idle = True  # nothing was left to fetch: librdkafka's broker threads may sleep (_wake_leaders)
            for tp, state in owned.items():
                if state.revoking:
                    continue
                idle = idle and state.paused  # as it was before this pass
                if state.held:  # behind a closed gate: nothing of it can be handed out
                    if not state.paused:
                        state.paused = True
                        pause.append(TopicPartition(*tp))
                    continue
                buffered = self._scheduler.buffered(tp)
                if not state.paused and (stop_all or (not low and buffered >= high)):
                    state.paused = True
                    pause.append(TopicPartition(*tp))
                elif state.paused and low and buffered <= high // 2:
                    state.paused = False
                    resume.append(TopicPartition(*tp))
        if pause:
            consumer.pause(pause)
        if resume:
            consumer.resume(resume)
            if idle:
                _wake_leaders(consumer, resume)
        self._commit_due(consumer)
        return holding

    def _commit_due(self, consumer: Consumer) -> None:
        now = time.monotonic()
        with self._lock:
            self._settle()
            if not self._policy.due(now):
                return
            offsets = to_commit({tp: s.tracker.position for tp, s in self._owned.items()}, self._committed)
            self._committed.update(offsets)
            self._policy.committed(now)
        if offsets:
            commit = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
            consumer.commit(offsets=commit, asynchronous=True)

    def _commit_sync(self, consumer: Consumer, offsets: Mapping[TP, int | None]) -> None:
        with self._lock:
            wanted = to_commit(offsets, self._committed)
        if not wanted:
            return
        try:
            result = consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in wanted.items()], asynchronous=False
            )
        except KafkaException as error:
            _log.error("commit of revoked partitions failed (%s): their records are read again", error)
            return
        failed = [tp for tp in result or () if tp.error is not None]
        if failed:
            _log.error("commit of revoked partitions failed for %s", failed)
        with self._lock:
            self._committed.update(wanted)

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        if error is not None or any(tp.error is not None for tp in partitions):
            with self._lock:  # recommit these at the next aggregated commit, done or not
                for tp in partitions:
                    self._committed.pop((tp.topic, tp.partition), None)
                self._policy.failed()
            _log.warning("asynchronous commit failed: %s", error or [tp for tp in partitions if tp.error])
        if self._user_on_commit is not None:
            self._user_on_commit(error, partitions)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self._absorb()  # fetched under the previous assignment: sorted by it
            for tp in partitions:
                state = self._owned[(tp.topic, tp.partition)] = _Owned()
                state.paused = True  # unknown: librdkafka may keep a pause across an eager rebalance
                self._committed.pop((tp.topic, tp.partition), None)
        _tell(self._listen_assign, [(tp.topic, tp.partition) for tp in partitions])

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Wait until the user completed these revocations (or they are lost), then commit the
        completed ones synchronously; returning lets librdkafka hand them to another member."""
        started = time.monotonic()
        tps = [(tp.topic, tp.partition) for tp in partitions]
        with self._lock:
            self._absorb()  # fetched before the revocation: kept below what was handed out
            revoking = [tp for tp in tps if tp in self._owned]
            for tp in revoking:
                self._stop_fetching(tp)
            self._revocations.request(revoking, started + self.revoke_timeout)
            self._cond.notify_all()
        while True:
            with self._lock:
                if self._closing or self._stop.is_set():
                    self._complete_unfinished(revoking)
                for tp in self._revocations.expire(time.monotonic()):
                    _log.warning("partition %s not released within %gs: lost", tp, self.revoke_timeout)
                    self._forget(tp)
                if self._revocations.resolved(revoking):
                    completed, lost = self._revocations.take_resolved(revoking)
                    positions = {tp: self._snapshots.pop(tp, None) for tp in completed}
                    break
                self._cond.wait(0.05)
            self._commit_due(consumer)  # the partitions that stay keep committing meanwhile
        self._commit_sync(consumer, positions)
        with self._lock:
            for tp in tps:
                self._committed.pop(tp, None)
        self.revocation_waits.append(time.monotonic() - started)
        _tell(self._listen_revoke, completed)
        _tell(self._listen_lost, lost)

    def _stop_fetching(self, tp: TP) -> None:
        """A revocation starts: drop the partition's buffered records above the highest one handed
        out. Those below it are gaps (``key`` mode hands out of offset order): they are still
        handed out, or the committed position could not pass them and the next owner would process
        again what was processed here after them."""
        self._settle()
        state = self._owned[tp]
        state.revoking = True
        if self._gate is not None:  # held records were never handed out: the next owner's
            self._gate.drop([tp])
            state.held = False
        flying = [m.offset() or 0 for m in self._in_flight.values() if _tp(m) == tp]
        limit = max(max(flying, default=-1), state.tracker.highest_done())
        self._scheduler.drop(tp, keep=lambda m: (m.offset() or 0) <= limit)
        state.tracker.truncate_after(limit)
        if self._flagged:  # those dropped from the scheduler
            self._flagged = {
                k: f for k, f in self._flagged.items() if _tp(f[0]) != tp or (f[0].offset() or 0) <= limit
            }

    def _complete_unfinished(self, partitions: list[TP]) -> None:
        pending = [tp for tp in partitions if tp in self._revocations.pending]
        self._revocations.complete_now(pending)
        for tp in pending:
            self._snapshots[tp] = self._forget(tp)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self._absorb()  # fetched under the previous assignment: sorted (then forgotten) by it
            tps = [(tp.topic, tp.partition) for tp in partitions]
            owned = [tp for tp in tps if tp in self._owned]
            for tp in tps:
                self._forget(tp)
                self._committed.pop(tp, None)
            self._revocations.lose(tps)
            self._revocations.take_resolved(tps)
            self._cond.notify_all()
        _tell(self._listen_lost, owned)

    def _shutdown(self, consumer: Consumer) -> None:
        with self._lock:
            self._settle()
            final = {tp: s.tracker.position for tp, s in self._owned.items()}
        try:
            if self._failure is None:
                self._commit_sync(consumer, final)
            consumer.close()  # revokes everything: _on_revoke completes at once while closing
        except Exception:
            _log.exception("AsyncConsumer: closing the consumer failed")
        if self._gate is not None:
            self._gate.close()
        with self._lock:
            self._closing = True
            self._cond.notify_all()


def _wake_leaders(consumer: Consumer, resumed: list[TopicPartition]) -> None:
    """Ask the resumed partitions' leaders for their end offsets: librdkafka's thread for a broker
    whose partitions were all paused sleeps up to a second and sees a resume only when it wakes,
    so the first records after a resume came 0.85 s late. The request wakes it once sent; the
    answer (about a millisecond here) is not needed, so a slow one is not waited for long. Only
    after every partition was paused: a broker thread with a partition to fetch is awake, and a
    request at every resume of a few of 1,000 partitions made each record cost 85 µs, not 9."""
    try:
        latest = [TopicPartition(tp.topic, tp.partition, OFFSET_END) for tp in resumed]
        consumer.offsets_for_times(latest, 0.1)
    except KafkaException as error:
        _log.debug("waking the leaders of resumed partitions failed: %s", error)


def _tp(record: Message) -> TP:
    return (record.topic(), record.partition())  # type: ignore[return-value]  # data records have both


def _tell(listener: Listener | None, partitions: Iterable[TP]) -> None:
    """Call a user's rebalance callback, without the lock (it may call this consumer's methods)."""
    if listener is not None:
        tps = frozenset(partitions)
        if tps:
            listener(tps)


def _tps(partitions: Iterable[TP], method: str) -> list[TP]:
    """``partitions`` as (topic, partition) tuples; anything else would silently match nothing."""
    tps = list(partitions)
    for tp in tps:
        if not (isinstance(tp, tuple) and len(tp) == 2 and isinstance(tp[0], str) and isinstance(tp[1], int)):
            raise TypeError(
                f"{method} takes an iterable of (topic, partition) tuples, as Batch.to_be_revoked "
                f"holds; got {tp!r} (a confluent_kafka TopicPartition: pass (tp.topic, tp.partition); "
                "one partition: pass [(topic, partition)])"
            )
    return tps


def _check(
    config: Mapping[str, Any],
    topics: list[str],
    ordering: str,
    max_in_flight: int,
    max_buffered: int,
    revoke_timeout: float,
) -> None:
    if "group.id" not in config:
        raise ConfigError("AsyncConsumer needs a group.id: it commits the group's offsets")
    if not topics:
        raise ConfigError("AsyncConsumer needs at least one topic")
    if ordering not in ORDERINGS:
        raise ConfigError(f"unknown ordering {ordering!r}: choose one of {', '.join(ORDERINGS)}")
    if str(config.get("enable.auto.commit", "false")).lower() == "true":
        raise ConfigError("AsyncConsumer commits processed offsets itself: remove enable.auto.commit")
    if max_in_flight < 1 or max_buffered < 1:
        raise ConfigError(
            f"max_in_flight and max_buffered must be at least 1, got {max_in_flight} and {max_buffered}"
        )
    poll_interval = float(config.get("max.poll.interval.ms", 300_000)) / 1000
    if not 0 < revoke_timeout < poll_interval:
        raise ConfigError(
            f"revoke_timeout must be positive and below max.poll.interval.ms ({poll_interval:g}s), "
            f"got {revoke_timeout:g}s: past that the group would remove this member"
        )
