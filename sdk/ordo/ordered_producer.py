"""OrderedProducer: a confluent-kafka Producer that partitions by the topic's epoch (KIP-253).

It picks each record's partition from the partition count of the topic's active epoch in the
epoch log, never from librdkafka's metadata, which changes at an arbitrary moment after
CreatePartitions. It reports liveness to the producer registry; when the operator fences a topic
it stops producing to it, flushes, and acknowledges, and resumes when the new epoch is active or
the fence is aborted. If it cannot report within its session it stops by itself (self-fencing),
so a producer that the operator considers dead cannot write.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException, Producer

from . import metrics
from ._clients import bounded_delivery, logged, quick_transaction_retries
from .control_topics import DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC
from .epochs import EpochHistory, stamp
from .epochs.liveness import ProducerReport
from .epochs.log import EpochLog
from .errors import (
    ConfigError,
    ProduceBlockedError,
    ProducerClosedError,
    TransactionScopeError,
    UndeclaredGroupError,
    UndeclaredPartitionError,
)
from .fence import LeaseState, TopicFence, writable
from .partitioners import (
    PARTITIONERS,
    ExplicitPartitioner,
    Murmur2Partitioner,
    RoundRobinPartitioner,
    make_partitioner,
    murmur2_partitions,
)
from .transactions import Declaration, Transaction, group_id_of

__all__ = ["OrderedProducer"]

_log = logging.getLogger(__name__)
DeliveryCallback = Callable[[KafkaError | None, Any], None]

if TYPE_CHECKING:
    from ._fastproduce import FastProduce, Lease


class _PyLease:
    """Until when the producer may queue records (``time.monotonic()``); the C module's Lease,
    which its C path reads, where that is built."""

    __slots__ = ("until",)

    def __init__(self) -> None:
        self.until = 0.0


_FastProduce: type[FastProduce] | None
_Lease: type[Lease] | type[_PyLease]
try:
    from ._fastproduce import FastProduce as _FastProduce
    from ._fastproduce import Lease as _Lease
except ImportError:  # built without a C compiler, or a free-threaded Python: the Python path serves
    _FastProduce, _Lease = None, _PyLease


class _TopicState:
    """Where one topic stands for this producer: its partition count and whether it is fenced."""

    __slots__ = (
        "epoch",
        "fence",
        "partitions",
        "rotation",
        "stamp",
        "unavailable",
        "unstamped",
        "writable",
    )

    def __init__(self, partitions: int, epoch: int) -> None:
        self.partitions = partitions
        self.epoch = epoch
        self.stamp: list[tuple[str, bytes]] = []
        self.unstamped: set[int] = set()
        self.fence = TopicFence()
        self.writable = False  # not blocked, producer not self-fenced nor closed (kept under the gate)
        self.rotation: RoundRobinPartitioner | None = None  # round_robin: this topic's own rotation
        self.unavailable: frozenset[int] = frozenset()  # partitions whose leader is unknown
        self.enter_epoch(epoch, partitions)

    def enter_epoch(self, epoch: int, partitions: int) -> None:
        """Produce with ``epoch`` from now on. The first record this producer sends to each
        partition in an epoch carries the epoch stamp (ordo.epochs.stamp): a partition's first
        record of an epoch is some producer's first there, so consumers see the stamp before any
        other record of that epoch; stamping every record would halve throughput (measured)."""
        if epoch != self.epoch or not self.stamp:
            self.unstamped = set(range(partitions))
        self.partitions, self.epoch = partitions, epoch
        self.stamp = stamp(epoch)


class OrderedProducer:
    """Produce with ordo's partitioning, so a topic can grow without reordering any key.

    ``config`` is a confluent-kafka Producer config (it may be transactional). ``partitioner`` is
    ``murmur2`` (Java-compatible, default), ``round_robin`` (KIP-369: keys stay on the records but
    do not choose the partition; every partition with a known leader in turn, per topic; leaders
    are re-read every ``availability_interval`` seconds) or ``explicit``.

    ``block_timeout`` (60 s, an expansion's default ``fenceTimeoutSeconds``) bounds how long
    ``produce()`` waits for a fence or a lapsed session before it raises. Unless ``config`` says
    otherwise, the producer is idempotent and its ``message.timeout.ms`` is 30 s: a fence waits
    that long, after its session, for a producer that falls silent (docs/reliability.md).
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        partitioner: str = "murmur2",
        producer_id: str | None = None,
        session_timeout: float = 10.0,
        block_timeout: float = 60.0,
        epoch_topic: str = DEFAULT_EPOCH_TOPIC,
        registry_topic: str = DEFAULT_REGISTRY_TOPIC,
        epoch_log: EpochLog | None = None,
        availability_interval: float = 1.0,
    ) -> None:
        if partitioner not in PARTITIONERS:
            raise ConfigError(f"unknown partitioner {partitioner!r}: choose one of {', '.join(PARTITIONERS)}")
        if session_timeout < 0.3:
            raise ConfigError(f"session_timeout must be at least 0.3 s, got {session_timeout}")
        if "bootstrap.servers" not in config:
            raise ConfigError("config needs bootstrap.servers")
        self.producer_id = producer_id or f"ordo-{uuid.uuid4().hex[:12]}"
        self.partitioner_name = partitioner
        self.session_timeout = session_timeout
        self.block_timeout = block_timeout
        self._partitioner = make_partitioner(partitioner)
        # murmur2's hash cache, read directly on the hot path (the partitioner fills it)
        self._hashes = self._partitioner.cache if isinstance(self._partitioner, Murmur2Partitioner) else None
        producer_config, self.delivery_timeout = bounded_delivery(config)
        self._producer = Producer(logged(quick_transaction_retries(producer_config)))
        # topic -> partition count, or (count, partitions whose records need Python), for the
        # topics produce()'s C path may serve now (see _route)
        self._routes: dict[str, int | tuple[int, frozenset[int]]] = {}
        client_config = {
            k: v for k, v in config.items() if not k.startswith(("transactional.", "enable.idem"))
        }
        self._owns_log = epoch_log is None
        self._log = epoch_log or EpochLog(client_config, epoch_topic)
        self._registry_topic = registry_topic
        self._reporter_config = client_config
        self._reporter_failed = threading.Event()
        self._reporter = self._new_reporter()
        self._topics: dict[str, _TopicState] = {}
        self._lock = threading.Condition()
        # Held while a record is checked and handed to librdkafka, and while a fence blocks a
        # topic: once a fence is applied no record can slip in with the old partition count.
        self._gate = threading.Lock()
        self._closed = False
        # Records are queued only while the lease holds: until a session after the last report
        # that arrived was sent (less a margin). The operator may judge the producer gone once
        # a session passes without a report, and a record queued then could land after the
        # thresholds, by the old count. produce() checks it on every call, so a process that
        # wakes from a pause stops before its heartbeat thread has run.
        self._lease = _Lease()  # what produce() reads of ``_liveness``, in C too
        self._liveness = LeaseState()  # moved by the threads under _gate (ordo.fence)
        self._lease_margin = session_timeout * 0.2
        self._report_now = threading.Event()
        self._stop = threading.Event()
        self.stalls: list[tuple[str, float]] = []  # (topic, seconds a produce() call was held)
        self._scope: Transaction | None = None  # the open pre-registered transaction (KIP-609)
        self._availability_interval = availability_interval
        self._leaders_now = threading.Event()  # a new topic: read its leaders without waiting
        self._unsubscribe = self._log.subscribe(self._on_history)
        if not self._log.catch_up(max(session_timeout, 10.0)):
            self.close()
            raise ConfigError(
                f"cannot read the epoch log {epoch_topic!r} at {config['bootstrap.servers']}: the ordo "
                "operator creates it when it starts with this Kafka as its default (ORDO_KAFKA_BOOTSTRAP, "
                "the chart's kafka.bootstrapServers); check that it runs, and that epoch_topic matches it"
            )
        fast = self._fast_path(self.produce)
        if fast is not None:  # the method serves every other call
            self.__dict__["produce"] = fast
        self._heartbeat = threading.Thread(
            target=self._heartbeat_loop, name="ordo-producer-heartbeat", daemon=True
        )
        self._heartbeat.start()
        if partitioner == "round_robin":
            self._leaders = threading.Thread(
                target=self._availability_loop, name="ordo-producer-leaders", daemon=True
            )
            self._leaders.start()

    # -- producing ---------------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        partition: int | None = None,
        on_delivery: DeliveryCallback | None = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        """Send a record. Blocks while the topic is fenced (up to ``block_timeout``, then raises
        ProduceBlockedError; nothing is sent). ``partition`` is honoured only by ``explicit``."""
        if key.__class__ is str:
            key = key.encode()
        raw = self._producer
        gate = self._gate
        lease = self._lease
        pinned = -1  # a partition chosen before a retry: a rotation must not advance twice
        scope = self._scope
        try:
            while True:
                gate.acquire()  # explicit acquire/release: measurably cheaper than `with` on this path
                state = self._topics.get(topic)
                if state is None or not state.writable or time.monotonic() >= lease.until:
                    gate.release()
                    self._wait_writable(topic)
                    continue
                try:
                    hashes = self._hashes
                    if hashes is not None and key is not None:
                        # the hot path, inlined: a cached murmur2 hash modulo the epoch's count
                        h = hashes.get(key)  # type: ignore[arg-type]
                        chosen = h % state.partitions if h is not None else self._hash_partition(key, state)  # type: ignore[arg-type]
                    elif state.rotation is not None and partition is None:
                        if 0 <= pinned < state.partitions:
                            chosen = pinned
                        else:
                            only = scope.declaration.partitions.get(topic) if scope is not None else None
                            chosen = state.rotation.partition(
                                None, state.partitions, None, only, state.unavailable
                            )
                    else:
                        chosen = self._partitioner.partition(key, state.partitions, partition)  # type: ignore[arg-type]
                    if scope is not None:
                        why = scope.aborted or scope.declaration.outside(topic, chosen)
                        if why is not None:
                            raise _OutsideScope(why)  # handled below, with the gate released
                    sent_headers = headers
                    if state.unstamped and chosen in state.unstamped:
                        sent_headers = _with_stamp(headers, state.stamp)  # kept apart: a retry stamps once
                    if on_delivery is None and sent_headers is None and not timestamp:
                        try:
                            raw.produce(topic, value, key, chosen)
                            return
                        except BufferError:
                            raw.poll(0.05)  # local queue full: serve delivery callbacks, then retry below
                    raw.produce(
                        topic,
                        value,
                        key,
                        chosen,
                        on_delivery=on_delivery,
                        timestamp=timestamp,
                        headers=sent_headers,
                    )
                    if chosen in state.unstamped:  # used up only once sent: a failed record keeps it
                        state.unstamped.discard(chosen)
                        self._route(topic, state)
                    return
                except KafkaException as error:
                    if error.args[0].code() != KafkaError._UNKNOWN_PARTITION:
                        raise
                    pinned = chosen  # the epoch is ahead of librdkafka's metadata: refresh, then retry
                finally:
                    gate.release()
                self._await_partition(topic, pinned)
        except _OutsideScope as outside:
            assert scope is not None
            self._scope_violated(scope, str(outside), UndeclaredPartitionError)

    def _await_partition(self, topic: str, partition: int) -> None:
        """Refresh metadata until librdkafka knows ``partition`` (created just before the epoch)."""
        deadline = time.monotonic() + self.block_timeout
        while time.monotonic() < deadline:
            metadata = self._producer.list_topics(topic, timeout=5).topics.get(topic)
            if metadata is not None and partition in metadata.partitions:
                return
            time.sleep(0.05)  # pacing metadata requests while the broker catches up
        raise ProduceBlockedError(
            f"partition {partition} of {topic!r} is in the epoch log but not in the broker's metadata "
            f"after {self.block_timeout:g}s; nothing was sent"
        )

    def unavailable_partitions(self, topic: str) -> frozenset[int]:
        """Partitions of ``topic`` whose leader was unknown at the last look (round_robin only)."""
        with self._lock:
            state = self._topics.get(topic)
            return state.unavailable if state is not None else frozenset()

    def refresh_availability(self, timeout: float = 5.0) -> None:
        """Re-read which partitions have a leader (the round-robin rotation skips the others)."""
        with self._lock:
            topics = [t for t, s in self._topics.items() if s.rotation is not None]
        for topic in topics:
            metadata = self._producer.list_topics(topic, timeout=timeout).topics.get(topic)
            if metadata is None or metadata.error is not None:
                continue
            down = frozenset(
                p for p, info in metadata.partitions.items() if info.leader < 0 or info.error is not None
            )
            with self._lock, self._gate:
                state = self._topics.get(topic)
                if state is not None and state.unavailable != down:
                    state.unavailable = down  # a new object only on change: the rotation's cache holds

    def _availability_loop(self) -> None:
        while not self._stop.is_set():
            self._leaders_now.wait(self._availability_interval)
            self._leaders_now.clear()
            if self._stop.is_set():
                return
            try:
                self.refresh_availability()
            except KafkaException as error:
                _log.warning("producer %s: cannot read partition leaders: %s", self.producer_id, error)

    def _hash_partition(self, key: bytes, state: _TopicState) -> int:
        partitioner = self._partitioner
        assert isinstance(partitioner, Murmur2Partitioner)
        return partitioner.partition(key, state.partitions)

    def partitions_for(self, topic: str) -> int:
        """The partition count this producer uses for ``topic`` now."""
        return self._wait_writable(topic).partitions

    def partitions_of(self, topic: str, keys: Iterable[bytes | str | None]) -> frozenset[int]:
        """The partitions of ``topic`` that records with these ``keys`` go to now: what a
        pre-registered transaction declares (``transaction(partitions={topic: ...})``). Every
        partition when a key is None or the partitioner ignores keys (round_robin); ConfigError
        with the explicit partitioner, whose partitions are the application's. Computed with this
        producer's partition count, which an expansion may raise before the transaction begins: a
        record then hashed outside the declaration raises at once, nothing sent."""
        count = self.partitions_for(topic)
        if self._hashes is None:
            if isinstance(self._partitioner, ExplicitPartitioner):
                raise ConfigError(
                    "the explicit partitioner takes each record's partition from the application: "
                    "declare those partitions"
                )
            return frozenset(range(count))
        return murmur2_partitions(keys if isinstance(keys, list | tuple) else list(keys), count)

    def poll(self, timeout: float = 0) -> int:
        return int(self._producer.poll(timeout))

    def flush(self, timeout: float = 30.0) -> int:
        return int(self._producer.flush(timeout))

    def __len__(self) -> int:
        return len(self._producer)

    # transactions pass straight through: a fence never waits on an open transaction
    def init_transactions(self, timeout: float = 30.0) -> None:
        self._producer.init_transactions(timeout)

    def begin_transaction(self) -> None:
        self._producer.begin_transaction()

    def commit_transaction(self, timeout: float = 30.0) -> None:
        self._producer.commit_transaction(timeout)

    def abort_transaction(self, timeout: float = 30.0) -> None:
        self._producer.abort_transaction(timeout)

    def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any, timeout: float = 30.0) -> None:
        scope = self._scope
        if scope is not None:
            outside = scope.aborted or scope.declaration.group_outside(group_id_of(group_metadata))
            if outside is not None:
                self._scope_violated(scope, outside, UndeclaredGroupError)
        self._producer.send_offsets_to_transaction(offsets, group_metadata, timeout)

    # -- pre-registered transactions (KIP-609) -----------------------------------------------

    def transaction(
        self,
        partitions: Mapping[str, Iterable[int]],
        group_id: str | None = None,
        timeout: float = 30.0,
    ) -> Transaction:
        """A transaction that may write only ``partitions`` ({topic: [partition, ...]}) and commit
        only offsets of ``group_id``: ``with producer.transaction(...) as tx: tx.produce(...)``.
        Declared partitions are checked against the topics' partition counts when it begins; a
        record or offsets outside them raise TransactionScopeError at once, nothing of them is
        sent, and the transaction is aborted. Round-robin records rotate over the declared
        partitions. Needs a transactional.id and init_transactions() first."""
        try:
            declaration = Declaration.of(partitions, group_id)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        return Transaction(self, declaration, timeout)

    def _begin_scoped(self, tx: Transaction) -> None:
        if self._scope is not None:
            raise TransactionScopeError("a transaction is already open on this producer; end it first")
        counts: dict[str, int] = {}
        for topic in tx.declaration.partitions:
            try:
                counts[topic] = self.partitions_for(topic)
            except ConfigError:
                continue  # left out of counts: reported as unknown below
        tx.declaration.check_exist(counts)
        self._producer.begin_transaction()
        self._set_scope(tx)

    def _end_scoped(self, tx: Transaction, commit: bool, timeout: float, reason: str = "") -> None:
        if self._scope is not tx:
            raise TransactionScopeError("this transaction is not open on the producer")
        if commit and tx.aborted is not None:
            self._set_scope(None)
            raise TransactionScopeError(f"the transaction was aborted ({tx.aborted}); it cannot commit")
        try:
            if commit:
                self._producer.commit_transaction(timeout)
            elif tx.aborted is None:
                tx.aborted = reason
                self._producer.abort_transaction(timeout)
        finally:
            self._set_scope(None)

    def _set_scope(self, tx: Transaction | None) -> None:
        with self._gate:
            self._scope = tx
            self._refresh_writable()  # a declared transaction's routes leave out what it did not declare

    def _scope_violated(self, tx: Transaction, why: str, error: type[TransactionScopeError]) -> None:
        """Abort at once (nothing of the offending write was sent), then raise ``error``."""
        if tx.aborted is not None:
            raise TransactionScopeError(f"the transaction was aborted ({tx.aborted}); begin a new one")
        with self._gate:
            tx.aborted = why
            self._refresh_writable()  # closes the C path's routes: every later record must raise
        self._producer.abort_transaction(30.0)
        code = "UNKNOWN_TOPIC_OR_PARTITION" if error is UndeclaredPartitionError else "INVALID_GROUP_ID"
        raise error(f"{code}: {why}; nothing of it was sent and the transaction is aborted")

    @property
    def raw(self) -> Producer:
        """The wrapped confluent-kafka Producer (for what this class does not wrap)."""
        return self._producer

    def close(self, timeout: float = 30.0) -> None:
        """Flush, report the producer closed (so fences do not wait for it) and stop."""
        with self._lock:
            if self._closed:
                return
            with self._gate:
                self._closed = True
                self._refresh_writable()
            self._lock.notify_all()
        self._stop.set()
        self._report_now.set()  # wakes the heartbeat thread, so close() does not wait out its interval
        self._producer.flush(timeout)
        if getattr(self, "_heartbeat", None) is not None:
            self._heartbeat.join(timeout=5)
            self._send_report(closed=True, timeout=5)
        if getattr(self, "_leaders", None) is not None:
            self._leaders_now.set()
            self._leaders.join(timeout=10)
        self._unsubscribe()
        if self._owns_log:
            self._log.close()

    def __enter__(self) -> OrderedProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- topic state -------------------------------------------------------------------------

    def _wait_writable(self, topic: str) -> _TopicState:
        started = time.monotonic()
        deadline = started + self.block_timeout
        with self._lock:
            if topic not in self._topics:
                self._register_topic(topic)
            while True:
                if self._closed:
                    raise ProducerClosedError("the producer is closed; create a new one")
                state = self._topics[topic]
                lapsed = not self._liveness.holds(time.monotonic())
                if not state.fence.blocked and not lapsed:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    why = (
                        "has lost its liveness session"
                        if lapsed
                        else f"is fenced for epoch {state.fence.epoch} of {topic!r}"
                    )
                    raise ProduceBlockedError(
                        f"producer {self.producer_id} {why} for over {self.block_timeout:g}s; "
                        "nothing was sent"
                    )
                self._lock.wait(min(left, 0.5))
        held = time.monotonic() - started
        if held > 0.001:
            self.stalls.append((topic, held))
            metrics.produce_blocked(topic, held)
        return state

    def _register_topic(self, topic: str) -> None:
        """First produce to a topic: report it before producing, so fences wait for us.

        Called with ``_lock`` held; the topic stays blocked until the report is written."""
        history = self._log.history(topic)
        if history is None:
            # all topics, not this one: asking for one topic by name would auto-create it
            metadata = self._producer.list_topics(timeout=10).topics.get(topic)
            if metadata is None or metadata.error is not None or not metadata.partitions:
                raise ConfigError(f"topic {topic!r} does not exist or has no partitions")
            history = EpochHistory.initial(topic, len(metadata.partitions))
        state = _TopicState(history.active.partitions, history.active.epoch)
        if self.partitioner_name == "round_robin":
            state.rotation = RoundRobinPartitioner()
            self._leaders_now.set()
        state.fence = TopicFence.unreported()
        self._topics[topic] = state
        self._lock.release()
        try:
            sent = time.monotonic()
            reported = self._send_report(timeout=self.session_timeout)
        finally:
            self._lock.acquire()
        if not reported:
            del self._topics[topic]
            raise ProduceBlockedError(
                f"cannot report to the producer registry {self._registry_topic!r}; nothing was sent"
            )
        current = self._log.history(topic) or history
        self._apply(state, current)
        # extended only while it holds: a lapsed producer (a new one too) resumes through the
        # heartbeat's re-read of the epoch log, which its log reader may not have done yet
        with self._gate:
            now = time.monotonic()
            self._set_lease(self._liveness.extended(sent, self.session_timeout, self._lease_margin, now))
        self._lock.notify_all()

    def _on_history(self, history: EpochHistory) -> None:
        with self._lock:
            state = self._topics.get(history.topic)
            if state is None:
                return
            fence = self._apply(state, history)
            self._lock.notify_all()
        if fence:
            self._report_now.set()

    def _apply(self, state: _TopicState, history: EpochHistory) -> bool:
        """Update a topic's state from its history; True when a new fence must be acknowledged."""
        with self._gate:
            state.fence = state.fence.seen(history)
            if not state.fence.blocked:
                state.enter_epoch(history.active.epoch, history.active.partitions)
            self._refresh_writable()
            return state.fence.unacknowledged is not None

    def _set_lease(self, lease: LeaseState) -> None:
        """Move to ``lease``: its time where produce() reads it, every topic's route; call with
        ``_gate`` held."""
        self._liveness = lease
        self._lease.until = lease.until
        self._refresh_writable()

    def _refresh_writable(self) -> None:
        """Recompute every topic's fast-path flag and route; call with ``_gate`` held."""
        for topic, state in self._topics.items():
            state.writable = writable(state.fence, self._liveness, self._closed)
            self._route(topic, state)

    def _fast_path(self, slow: Callable[..., None]) -> Callable[..., None] | None:
        """produce()'s common case in one C call (ordo/_fastproduce.c), every other call handed to
        ``slow``; None without the C module or with another partitioner than murmur2."""
        if _FastProduce is None or self._hashes is None:
            return None
        return _FastProduce(self._routes, self._lease, self._producer.produce, slow)  # type: ignore[arg-type]

    def _route(self, topic: str, state: _TopicState) -> None:
        """Open ``topic`` to produce()'s C path, or close it; call with ``_gate`` held.

        Open only while a record may need nothing but hash % count: writable, murmur2, and in a
        declared transaction only for a declared topic not yet aborted. The partitions whose
        records need Python go with the count: those still to stamp in this epoch, and those a
        declared transaction leaves out (Python raises for them). The C path runs without
        releasing the GIL, so once this closes a route no record can take it with the old count."""
        scope = self._scope
        declared = scope.declaration.partitions.get(topic) if scope is not None else None
        if (
            not state.writable
            or self._hashes is None
            or (scope is not None and (declared is None or scope.aborted))
        ):
            self._routes.pop(topic, None)
            return
        python = frozenset(state.unstamped)
        if declared is not None:
            python = python.union(frozenset(range(state.partitions)).difference(declared))
        self._routes[topic] = (state.partitions, python) if python else state.partitions

    # -- registry ----------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        interval = self.session_timeout / 3
        while not self._stop.is_set():
            fenced = self._pending_fences()
            if fenced and self._producer.flush(self.session_timeout) > 0:
                # Records sent before the fence are not all written yet: acknowledging now would
                # let the thresholds be read before them. Report liveness only; the next turn
                # flushes again (a fence that times out is aborted by the operator).
                _log.warning(
                    "producer %s: records still queued at a fence; not acknowledging yet", self.producer_id
                )
                fenced = {}
            sent = time.monotonic()
            if self._send_report(timeout=interval, acked=fenced):
                self._renew(sent, fenced)
            else:
                with self._lock, self._gate:
                    before, after = self._liveness, self._liveness.unreported(time.monotonic())
                    if after != before:
                        self._set_lease(after)
                if after.stopped and not before.stopped:
                    _log.error("producer %s: cannot report liveness; stopping to produce", self.producer_id)
            self._report_now.wait(interval)
            self._report_now.clear()

    def _renew(self, sent: float, acked: Mapping[str, int]) -> None:
        """A report sent at ``sent`` arrived: extend the lease to a session after it. After a
        lapse the operator may have fenced and published without this producer: the epoch log
        is read to its end and applied first, so nothing is queued by a partition count it
        replaced (the log's listener may not have run yet when catch_up returns)."""
        if not self._liveness.holds(time.monotonic()) and not self._reread_epochs():
            return  # the next report tries again; produce() stays held meanwhile
        with self._lock:
            if self._liveness.stopped:
                _log.warning("producer %s: reporting again, resuming", self.producer_id)
            with self._gate:
                for topic, epoch in acked.items():
                    self._topics[topic].fence = self._topics[topic].fence.acknowledged(epoch)
                self._set_lease(self._liveness.renewed(sent, self.session_timeout, self._lease_margin))
            self._lock.notify_all()

    def _reread_epochs(self) -> bool:
        """Read the epoch log to its end and apply every topic's history; False when it cannot be
        read within a session."""
        with self._lock, self._gate:
            self._set_lease(self._liveness.stop())
        if not self._log.catch_up(self.session_timeout):
            _log.error(
                "producer %s: cannot read the epoch log after a lapse; still stopped", self.producer_id
            )
            return False
        fence = False
        with self._lock:
            for topic, state in self._topics.items():
                history = self._log.history(topic)
                if history is not None:
                    fence = self._apply(state, history) or fence
        if fence:
            self._report_now.set()
        return True

    def _pending_fences(self) -> dict[str, int]:
        """Fences applied (so no record can follow) but not yet acknowledged."""
        with self._lock, self._gate:
            return {t: e for t, s in self._topics.items() if (e := s.fence.unacknowledged) is not None}

    def _report(self, acked: Mapping[str, int], closed: bool) -> ProducerReport:
        with self._lock:
            topics = dict(self._topics)
            fenced = {t: s.fence.acked for t, s in topics.items() if s.fence.acked >= 0}
        fenced.update(acked)
        return ProducerReport(
            producer_id=self.producer_id,
            topics=tuple(sorted(topics)),
            partitioner=self.partitioner_name,
            epochs={t: s.epoch for t, s in topics.items()},
            partitions={t: s.partitions for t, s in topics.items()},
            fenced=fenced,
            session_timeout_ms=int(self.session_timeout * 1000),
            delivery_timeout_ms=self.delivery_timeout,
            reported_at_ms=int(time.time() * 1000),
            closed=closed,
        )

    def _new_reporter(self) -> Producer:
        """The registry's producer, flushed at every report (which serves its log lines).
        Idempotent: a retried older report landing after a newer one would only make a fence wait
        longer, but a report's order is what the registry means. Idempotence makes some errors
        fatal (InitProducerId refused, a sequence gap): ``_failed_reporter`` marks it for renewal."""
        return Producer(logged({
            **self._reporter_config, "linger.ms": 0, "acks": "all", "enable.idempotence": True,
            "error_cb": self._failed_reporter,
        }))  # fmt: skip

    def _failed_reporter(self, error: KafkaError) -> None:
        if error.fatal():
            _log.warning("producer %s: registry producer failed (%s); renewing", self.producer_id, error)
            self._reporter_failed.set()
        user_callback = self._reporter_config.get("error_cb")
        if user_callback is not None:
            user_callback(error)

    def _send_report(
        self, timeout: float, acked: Mapping[str, int] | None = None, closed: bool = False
    ) -> bool:
        value = self._report(acked or {}, closed).model_dump_json().encode()
        for _attempt in range(2):  # once more with a renewed producer if this one failed for good
            if self._reporter_failed.is_set():
                self._reporter_failed.clear()
                self._reporter = self._new_reporter()
            result: list[KafkaError | None] = []
            try:
                self._reporter.produce(
                    self._registry_topic,
                    key=self.producer_id.encode(),
                    value=value,
                    on_delivery=functools.partial(_note_delivery, result),
                )
                self._reporter.flush(timeout)
            except BufferError:
                return False
            except Exception as error:
                # produce() refuses with _FATAL; flush() raises the fatal error after error_cb
                # (chained into a SystemError when a delivery callback runs with it pending)
                if not (_is_fatal(error) or self._reporter_failed.is_set()):
                    raise
                self._reporter_failed.set()
                continue
            if result and result[0] is None:
                return True
            if not self._reporter_failed.is_set():
                return False
        return False


def _note_delivery(into: list[KafkaError | None], error: KafkaError | None, _msg: Any) -> None:
    into.append(error)


def _is_fatal(error: BaseException | None) -> bool:
    """A client's fatal error, raised itself or as the cause of another."""
    while error is not None:
        cause = error.args[0] if isinstance(error, KafkaException) and error.args else None
        if isinstance(cause, KafkaError) and (cause.fatal() or cause.code() == KafkaError._FATAL):
            return True
        error = error.__cause__
    return False


class _OutsideScope(Exception):
    """A record outside the open transaction's declaration (internal: becomes a scope error)."""


def _with_stamp(headers: Any, epoch_stamp: list[tuple[str, bytes]]) -> list[Any]:
    """The caller's headers (a list of pairs or a dict) followed by the epoch stamp."""
    if headers is None:
        return epoch_stamp
    pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    return pairs + epoch_stamp
