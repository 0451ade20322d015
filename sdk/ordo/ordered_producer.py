# OrderedProducer is over 450 lines on purpose for now: fence and lease are pure in ordo.fence and
# the journal in ordo.own_transactions; the reporter, route table, transaction scope and committer
# still share its two locks, and splitting them by job is issue 46.
"""OrderedProducer: a confluent-kafka Producer that partitions by the topic's epoch (KIP-253).

It picks each record's partition from the partition count of the topic's active epoch in the
epoch log, never from librdkafka's metadata, which changes at an arbitrary moment after
CreatePartitions. It reports liveness to the producer registry; when the operator fences a topic
it commits (or flushes) what the fence moves and acknowledges, writes on the records of keys whose
partition the fence keeps, parks the moved keys' records and writes them once the new epoch is
active (or the fence is aborted). If it cannot report within its session it stops by itself.

By default (``fencing="broker"``) it writes in transactions of its own, so the operator can have
the broker refuse a producer that does not acknowledge a fence, whatever its clocks say
(``ordo.own_transactions``); ``fencing="lease"`` relies on the producer's lease and bounded
delivery timeout alone (docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException, Producer

from . import metrics
from ._clients import bounded_delivery, logged, quick_transaction_retries
from .control_topics import DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC
from .epochs import EpochHistory, stamp
from .epochs.liveness import ProducerReport
from .epochs.log import EpochLog, refuse_unread
from .errors import (
    ConfigError,
    ProduceBlockedError,
    ProducerClosedError,
    TransactionScopeError,
    UndeclaredGroupError,
    UndeclaredPartitionError,
)
from .fence import LeaseState, TopicFence, parks, staying_writable, writable
from .own_transactions import Journal, Remedy, Report, after_failure, fail_all, own_transactional_id
from .partitioners import (
    PARTITIONERS,
    ExplicitPartitioner,
    Murmur2Partitioner,
    RoundRobinPartitioner,
    make_partitioner,
    murmur2,
    murmur2_partitions,
    to_positive,
)
from .transactions import Declaration, Transaction, group_id_of

__all__ = ["FENCING_MODES", "OrderedProducer"]

FENCING_MODES = ("broker", "lease")

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


_WAIT, _GO, _PARK = 0, 1, 2  # what a record of a fenced topic does (OrderedProducer._fenced)
_UNRULED = object()  # _wait_writable's key: the record waits for the topic to take every record


class _TopicState:
    """Where one topic stands for this producer: its partition count and whether it is fenced."""

    __slots__ = (
        "epoch",
        "fence",
        "parked",
        "parked_at",
        "parked_epoch",
        "parked_resent",
        "partitions",
        "rotation",
        "stamp",
        "staying",
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
        # during an acknowledged fence: records whose partition the fence keeps go (ordo.fence)
        self.staying = False
        # moved keys' records handed over during the fence, oldest first: produce()'s arguments,
        # handed over once the fence ends (by the count it ends with), before anything new
        self.parked: deque[tuple[Any, ...]] = deque()
        self.parked_at: deque[float] = deque()  # when each was parked (time.monotonic())
        self.parked_epoch = -1  # the fencing epoch they wait for
        self.parked_resent = 0  # records of an aborted transaction parked (at the front, in order)
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
    otherwise, the producer is idempotent and its ``message.timeout.ms`` is 30 s; ``acks`` must be
    ``all``.

    ``fencing="broker"`` (default): a ``config`` without ``transactional.id`` gets ordo's own
    transactions (``ordo-producer.<producer_id>``), committed every ``commit_interval`` seconds, by
    ``flush()`` and ``close()``: read_committed consumers see a record once its transaction
    commits, delivery callbacks run after the commit (on the thread that committed), and a
    producer fenced by the operator sends its aborted records again by the new count. A
    transactional ``config`` keeps its transactions the application's; the operator may fence
    it too (the application then meets ``_FENCED`` as with any newer instance). ``fencing="lease"``:
    no transactions of ordo's; a fence waits out a silent producer's session and delivery timeout.

    During an expansion's fence, once acknowledged, records whose key the old and the new count put
    in the same partition (and keyless ones) are written at once; a moved key's record is *parked*
    and written once the fence ends (by the new count when the epoch is published, by the old when
    it is aborted), before any later record of the topic: ``produce()`` returns at once. Up to
    ``max_parked`` records per topic (0: none), beyond which ``produce()`` waits for the fence's end
    (``block_timeout``, then ProduceBlockedError). A transactional ``config`` parks nothing (its
    transaction could commit without them): its moved keys' ``produce()`` waits. ``flush()`` and
    ``close()`` wait for parked records too; those still parked at the end of ``close()``'s timeout
    are reported failed (``_PURGE_QUEUE``) to their delivery callbacks, not written.
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
        fencing: str = "broker",
        commit_interval: float = 0.1,
        max_parked: int = 100_000,
    ) -> None:
        if max_parked < 0:
            raise ConfigError(f"max_parked must be 0 or more, got {max_parked}")
        if fencing not in FENCING_MODES:
            raise ConfigError(f"unknown fencing {fencing!r}: choose one of {', '.join(FENCING_MODES)}")
        if not 0 < commit_interval <= 60:
            raise ConfigError(f"commit_interval must be above 0 and at most 60 s, got {commit_interval}")
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
        self.fencing = fencing
        self.commit_interval = commit_interval
        self._partitioner = make_partitioner(partitioner)
        # murmur2's hash cache, read directly on the hot path (the partitioner fills it)
        self._hashes = self._partitioner.cache if isinstance(self._partitioner, Murmur2Partitioner) else None
        own = fencing == "broker" and "transactional.id" not in config
        # a moved key's record may wait out a fence apart from the caller's later records only
        # where no transaction of the application's would commit without it
        self._may_park = own or "transactional.id" not in config
        # ordo's own transactions: the open one's records, held reports, what to send again
        self._own: Journal | None = Journal() if own else None
        self.transactional_id: str | None = None
        """The transactional.id the operator may fence this producer by (None: lease only)."""
        if fencing == "broker":
            self.transactional_id = (
                own_transactional_id(self.producer_id) if own else str(config["transactional.id"])
            )
        self._default_delivery: DeliveryCallback | None = None
        if own:
            # held until the commit like every record's callback, so it must be per record
            config = dict(config)
            self._default_delivery = config.pop("on_delivery", None)
            config["transactional.id"] = self.transactional_id
        producer_config, self.delivery_timeout = bounded_delivery(config)
        self._producer_config = logged(
            quick_transaction_retries({**producer_config, "error_cb": self._producer_error})
        )
        self._user_error_cb = config.get("error_cb")
        self._fatal: Producer | None = None  # a producer librdkafka reported unusable (error_cb)
        self._producer = Producer(self._producer_config)
        self._park_limit = max_parked
        self._releaser: threading.Thread | None = None  # hands parked records over after a fence
        # topic -> partition count, or (count, partitions whose records need Python), for the
        # topics produce()'s C path may serve now (see _route)
        self._routes: dict[str, int | tuple[int, frozenset[int]] | tuple[int, frozenset[int], int]] = {}
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
        self._closing = False
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
        # the producer's own transactions: produce() waits while one is committed or records of
        # an aborted one are sent again (_held); one commit, abort or renewal at a time
        self._held = False
        self._committing = False  # the C path buffers (ordo._fastproduce), the Python path waits
        self._renewal_due = False  # the producer was fenced (or failed): a new one is needed
        self._epochs_stale = False  # aborted: the epoch log is read again before records go again
        self._abort_due = False  # the transaction takes no more records: the committer aborts it
        self._started = False  # the first producer's transactions are initialised
        self._held_why = ""  # why records wait (cannot initialise transactions: the error)
        self._commit_lock = threading.Lock()
        self._commit_now = threading.Event()
        self._committed_at = time.monotonic()  # the last commit (the committer's count starts over)
        self.stalls: list[tuple[str, float]] = []  # (topic, seconds a produce() call was held)
        self.parks: list[tuple[str, float]] = []  # (topic, seconds a moved key's record was parked)
        self._scope: Transaction | None = None  # the open pre-registered transaction (KIP-609)
        self._availability_interval = availability_interval
        self._leaders_now = threading.Event()  # a new topic: read its leaders without waiting
        self._unsubscribe = self._log.subscribe(self._on_history)
        try:
            refuse_unread(self._log, config["bootstrap.servers"])
        except ConfigError:
            self.close()
            raise
        if self._own is not None:
            # its transactions start on the committer thread: produce() waits for them (up to
            # block_timeout), so a producer built while the coordinator is unreachable still builds
            self._held = self._renewal_due = True
            self._commit_now.set()  # the committer's first turn starts them
        self._fast = self._fast_path(self.produce)
        if self._fast is not None:  # the method serves every other call
            self.__dict__["produce"] = self._fast
        self._heartbeat = threading.Thread(
            target=self._heartbeat_loop, name="ordo-producer-heartbeat", daemon=True
        )
        self._heartbeat.start()
        if partitioner == "round_robin":
            self._leaders = threading.Thread(
                target=self._availability_loop, name="ordo-producer-leaders", daemon=True
            )
            self._leaders.start()
        if self._own is not None:
            self._committer = threading.Thread(
                target=self._commit_loop, name="ordo-producer-commit", daemon=True
            )
            self._committer.start()

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
        """Send a record. While the topic is fenced, a record of a key the fence does not move goes
        on and one of a moved key is parked (the class says when); a record that can do neither
        (round_robin, explicit, a full park) blocks until the fence ends (up to ``block_timeout``,
        then raises ProduceBlockedError; nothing is sent). ``partition`` is honoured only by
        ``explicit``."""
        if key.__class__ is str:
            key = key.encode()
        self._produce(topic, value, key, partition, on_delivery, timestamp, headers, False)  # type: ignore[arg-type]

    def _produce(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | None,
        partition: int | None,
        on_delivery: DeliveryCallback | None,
        timestamp: int,
        headers: Any,
        resending: bool,
        releasing: bool = False,
    ) -> bool:
        """produce()'s Python path. ``resending``: a record of an aborted transaction of the
        producer's own, sent again under its commit lock: it does not wait for the topic (False
        when the topic takes no records now) and leaves the records to send again at once.
        ``releasing``: the topic's oldest parked record, after its fence ended (False when it
        cannot go now); it leaves the parked records once handed over."""
        gate = self._gate
        lease = self._lease
        own = self._own
        pinned = -1  # a partition chosen before a retry: a rotation must not advance twice
        scope = self._scope
        if on_delivery is None:
            on_delivery = self._default_delivery
        try:
            while True:
                gate.acquire()  # explicit acquire/release: measurably cheaper than `with` on this path
                raw = self._producer  # read each turn: a fenced producer is replaced
                state = self._topics.get(topic)
                if (
                    state is None
                    or not (
                        state.writable
                        or (resending and self._sendable(state))
                        or (releasing and self._releasable(state))
                    )
                    or (self._committing and not resending)
                    or time.monotonic() >= lease.until
                ):
                    # not writable: during an acknowledged fence a staying record goes on (by the
                    # count of now: the same partition by the new), a moved key's record parks
                    verdict = (
                        _WAIT
                        if state is None or releasing
                        else self._fenced(state, key, partition, resending)
                    )
                    if verdict == _WAIT:
                        gate.release()
                        if resending or releasing:
                            return False
                        self._wait_writable(topic, key if partition is None else _UNRULED)
                        continue
                    assert state is not None
                    if verdict == _PARK:
                        entry = (topic, value, key, partition, on_delivery, timestamp, headers)
                        self._park(state, entry, resending)
                        gate.release()
                        return True
                failed: Producer | None = None
                stuck: Producer | None = None
                try:
                    hashes = self._hashes
                    if hashes is not None and key is not None:
                        # the hot path, inlined: a cached murmur2 hash modulo the epoch's count
                        h = hashes.get(key)
                        chosen = h % state.partitions if h is not None else self._hash_partition(key, state)
                    elif state.rotation is not None and partition is None:
                        if 0 <= pinned < state.partitions:
                            chosen = pinned
                        else:
                            only = scope.declaration.partitions.get(topic) if scope is not None else None
                            chosen = state.rotation.partition(
                                None, state.partitions, None, only, state.unavailable
                            )
                    else:
                        chosen = self._partitioner.partition(key, state.partitions, partition)
                    if scope is not None:
                        why = scope.aborted or scope.declaration.outside(topic, chosen)
                        if why is not None:
                            raise _OutsideScope(why)  # handled below, with the gate released
                    sent_headers = headers
                    if state.unstamped and chosen in state.unstamped:
                        sent_headers = _with_stamp(headers, state.stamp)  # kept apart: a retry stamps once
                    delivery = on_delivery if own is None or on_delivery is None else own.hold(on_delivery)
                    if delivery is None and sent_headers is None and not timestamp:
                        try:
                            raw.produce(topic, value, key, chosen)
                            if own is not None:
                                self._journaled(own, (topic, value, key, partition, None, 0, None), resending)
                            if releasing:
                                self._released(topic, state)
                            return True
                        except BufferError:
                            raw.poll(0.05)  # local queue full: serve delivery callbacks, then retry below
                    raw.produce(
                        topic,
                        value,
                        key,
                        chosen,
                        on_delivery=delivery,
                        timestamp=timestamp,
                        headers=sent_headers,
                    )
                    if own is not None:
                        entry = (topic, value, key, partition, on_delivery, timestamp, headers)
                        self._journaled(own, entry, resending)
                    if chosen in state.unstamped:  # used up only once sent: a failed record keeps it
                        state.unstamped.discard(chosen)
                        self._route(topic, state)
                    if releasing:
                        self._released(topic, state)
                    return True
                except KafkaException as error:
                    kafka_error = error.args[0]
                    if own is not None and after_failure(kafka_error) == Remedy.RENEW:
                        failed = raw  # fenced (or failed for good): renewed below, then sent again
                    elif own is not None and kafka_error.code() == KafkaError._STATE:
                        # the transaction takes no record: it must be aborted (the coordinator
                        # timed it out during a pause, a record failed); nothing was queued
                        stuck = raw
                    elif kafka_error.code() != KafkaError._UNKNOWN_PARTITION:
                        raise
                    else:
                        pinned = chosen  # the epoch is ahead of librdkafka's metadata: refresh, then retry
                finally:
                    gate.release()
                if failed is not None or stuck is not None:
                    if failed is not None:
                        self._must_renew(failed)
                    else:
                        assert stuck is not None
                        self._must_abort(stuck)
                    if resending:
                        return False
                    continue
                self._await_partition(topic, pinned)
        except _OutsideScope as outside:
            assert scope is not None
            self._scope_violated(scope, str(outside), UndeclaredPartitionError)
        return False  # pragma: no cover - _scope_violated raises

    def _fenced(self, state: _TopicState, key: bytes | None, partition: int | None, resending: bool) -> int:
        """What a record of a fenced topic does now (``ordo.fence``: staying records go, a moved
        key's record parks), with ``_gate`` held (or ``_lock``, to know when to look again)."""
        fence = state.fence
        if (
            partition is not None
            or self._hashes is None
            or self._scope is not None
            or state.parked_epoch not in (-1, fence.epoch)  # parked at an earlier fence: they go first
            or not staying_writable(
                fence, self._liveness, self._closed, self._held and not resending, self._own is not None
            )
            or time.monotonic() >= self._lease.until
        ):
            return _WAIT
        h: int | None = None
        if key is not None:
            h = self._hashes.get(key)
            if h is None:
                h = to_positive(murmur2(key))
        if not parks(h, state.partitions, fence.partitions):
            return _GO if resending or not self._committing else _WAIT
        if not self._may_park or len(state.parked) >= self._park_limit:
            return _WAIT  # backpressure: the caller waits for the fence's end
        return _PARK

    def _park(self, state: _TopicState, entry: tuple[Any, ...], resending: bool) -> None:
        """A moved key's record waits for the fence's end (with ``_gate`` held). One of an aborted
        transaction goes before every record parked by produce() (those were handed over after it)."""
        if resending:
            own = self._own
            assert own is not None
            state.parked.insert(state.parked_resent, entry)
            state.parked_at.insert(state.parked_resent, time.monotonic())
            state.parked_resent += 1
            own.resend.popleft()
        else:
            state.parked.append(entry)
            state.parked_at.append(time.monotonic())
        state.parked_epoch = state.fence.epoch

    def _releasable(self, state: _TopicState) -> bool:
        """Whether parked records may go now: as ``writable`` but for the parked records themselves."""
        return writable(state.fence, self._liveness, self._closed, self._held)

    def _released(self, topic: str, state: _TopicState) -> None:
        """The oldest parked record was handed over (with ``_gate`` held); the last opens the topic."""
        state.parked.popleft()
        self.parks.append((topic, time.monotonic() - state.parked_at.popleft()))
        state.parked_resent = max(0, state.parked_resent - 1)
        if not state.parked:
            state.parked_epoch = -1
            self._refresh_writable()

    def _release_loop(self) -> None:
        """Hand every topic's parked records over, oldest first, once its fence ended (by the count
        it ended with); produce() waits meanwhile, so nothing new of the topic goes before them."""
        while True:
            with self._lock:
                due = [(t, s) for t, s in self._topics.items() if s.parked and not s.fence.blocked]
                if not due or self._closed:
                    self._releaser = None
                    self._lock.notify_all()
                    return
            for _topic, state in due:
                while state.parked and not state.fence.blocked:
                    topic, value, key, partition, on_delivery, timestamp, headers = state.parked[0]
                    if not self._produce(
                        topic, value, key, partition, on_delivery, timestamp, headers, False, releasing=True
                    ):
                        with self._lock:
                            if self._closed:
                                self._releaser = None
                                return
                            self._lock.wait(0.05)  # a commit's end, a renewal, a lease renewed wake it

    def _release_parked(self) -> None:
        """Start handing parked records over (with ``_lock`` held), unless that runs already."""
        if self._releaser is None and not self._closed:
            self._releaser = threading.Thread(
                target=self._release_loop, name="ordo-producer-release", daemon=True
            )
            self._releaser.start()

    @staticmethod
    def _journaled(own: Journal, entry: tuple[Any, ...], resending: bool) -> None:
        """A record handed over joins the open transaction's journal (with the gate held); one
        sent again leaves the records to send again in the same step."""
        own.record(entry)
        if resending:
            own.resend.popleft()

    def _sendable(self, state: _TopicState) -> bool:
        """Whether a record sent again may go now: as ``writable`` but for the producer's own hold."""
        return writable(state.fence, self._liveness, self._closed)

    def write_beside(
        self,
        topic: str,
        value: bytes | str,
        key: bytes | str | None,
        partition: int,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """Write a record to an exact partition of a topic ordo does not partition (a checkpoint,
        a dead letter) in order with this producer's records: with ordo's own transactions, in
        the open one, so it commits with the records before it (or is aborted and written again
        with them), and its delivery callback runs after the commit. The topic is neither
        reported to the registry nor fenced. Waits while a commit runs, and while records of moved
        keys are parked in a fence (up to ``block_timeout``)."""
        own = self._own
        if own is None:
            self._producer.produce(topic, value, key, partition, on_delivery=on_delivery)
            return
        deadline = time.monotonic() + self.block_timeout
        with self._lock:  # a commit begins under _lock: none can begin while this waits or writes
            # records parked in a fence are written later: one beside them would commit first
            while self._held or self._committing or self._parked_count():
                if self._closed:
                    raise ProducerClosedError("the producer is closed; create a new one")
                left = deadline - time.monotonic()
                if left <= 0:
                    why = self._held_why or "cannot commit its transaction (or send its records again)"
                    raise ProduceBlockedError(f"producer {self.producer_id} {why}; nothing was sent")
                self._lock.wait(min(left, 0.5))
            with self._gate:
                self._hand_beside(own, (topic, value, key, partition, on_delivery), resending=False)

    def _hand_beside(self, own: Journal, entry: tuple[Any, ...], resending: bool) -> None:
        """A ``write_beside`` record handed over and journaled (with the gate held)."""
        topic, value, key, partition, on_delivery = entry
        held = own.hold(on_delivery) if on_delivery is not None else None
        self._producer.produce(topic, value, key, partition, on_delivery=held)
        self._journaled(own, entry, resending)

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
        """Serve delivery callbacks (with ordo's own transactions they run after the commit, on
        the thread that committed) and errors; a producer fenced through Kafka is reopened, not
        raised to the application."""
        producer = self._producer
        try:
            return int(producer.poll(timeout))
        except KafkaException as error:
            if self._own is None or after_failure(error.args[0]) != Remedy.RENEW:
                raise
            self._must_renew(producer)
            return 0

    def flush(self, timeout: float = 30.0) -> int:
        """Wait until every record is delivered (with ordo's own transactions: committed, after
        any fence it waits for; a moved key's record parked in a fence, once it ends and it is
        written); the number of records still not delivered."""
        own = self._own
        deadline = time.monotonic() + timeout
        if own is None:
            self._await_parked(deadline)
            return int(self._producer.flush(max(deadline - time.monotonic(), 0))) + self._parked_count()
        while True:
            left = deadline - time.monotonic()
            self._commit_turn(max(left, 0.1))
            if not (undelivered := len(own) + self._parked_count()) or left <= 0:
                return undelivered
            with self._lock:  # records to send again wait for a fence's end: news wakes us
                self._lock.wait(min(left, 0.05))

    def __len__(self) -> int:
        """Records not delivered yet (with ordo's own transactions: not committed yet), parked ones
        included."""
        queued = len(self._own) if self._own is not None else len(self._producer)
        return queued + self._parked_count()

    def _parked_count(self) -> int:
        return sum(len(state.parked) for state in list(self._topics.values()))

    def _await_parked(self, deadline: float) -> None:
        """Wait until no record is parked (their fences ended and they were handed over)."""
        with self._lock:
            while self._parked_count() and (left := deadline - time.monotonic()) > 0:
                self._lock.wait(min(left, 0.05))

    def _fail_parked(self, timeout: float) -> None:
        """At close: records still parked (their fence did not end) are reported failed, not dropped."""
        with self._gate:
            lost = [entry for state in self._topics.values() for entry in state.parked]
            for state in self._topics.values():
                state.parked.clear()
                state.parked_at.clear()
        if lost:
            self._fail_at_close(lost, "waited for a fence to end", "their fence did not end", timeout)

    def _fail_at_close(self, lost: list[Any], waited: str, why: str, timeout: float) -> None:
        """Records ``close()`` could not write: each delivery callback hears it, and the log says it."""
        error = KafkaError(KafkaError._PURGE_QUEUE, f"the producer closed while this record {waited}")
        silent = fail_all(lost, error)
        _log.error(
            "producer %s: closed with %d record(s) not written (%d without a delivery callback): %s "
            "within %gs",
            self.producer_id,
            len(lost),
            silent,
            why,
            timeout,
        )

    # transactions pass straight through: a fence never waits on an open transaction
    def init_transactions(self, timeout: float = 30.0) -> None:
        self._refuse_own("init_transactions")
        self._producer.init_transactions(timeout)

    def begin_transaction(self) -> None:
        self._refuse_own("begin_transaction")
        self._producer.begin_transaction()

    def commit_transaction(self, timeout: float = 30.0) -> None:
        self._refuse_own("commit_transaction")
        self._producer.commit_transaction(timeout)

    def abort_transaction(self, timeout: float = 30.0) -> None:
        self._refuse_own("abort_transaction")
        self._producer.abort_transaction(timeout)

    def _refuse_own(self, call: str) -> None:
        if self._own is not None:
            raise ConfigError(
                f"{call}: this producer commits transactions of its own (fencing='broker' and no "
                "transactional.id in its config); give the config a transactional.id to run "
                "transactions yourself (the operator may fence it as well)"
            )

    def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any, timeout: float = 30.0) -> None:
        self._refuse_own("send_offsets_to_transaction")
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
        self._refuse_own("transaction")
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
        """The wrapped confluent-kafka Producer (for what this class does not wrap; with ordo's
        own transactions a fenced one is replaced by a new one)."""
        return self._producer

    def close(self, timeout: float = 30.0) -> None:
        """Flush (commit), report the producer closed (so fences do not wait for it) and stop.
        With ordo's own transactions, records that cannot be committed within ``timeout`` are
        reported failed to their delivery callbacks and logged; nothing of them is written."""
        with self._lock:
            if self._closed or self._closing:
                return
            self._closing = True
        deadline = time.monotonic() + timeout
        if getattr(self, "_committer", None) is not None:
            self.flush(timeout)  # before closing: records of an aborted transaction go again
        self._await_parked(deadline)  # parked records go once their fence ends
        with self._lock:
            self._fail_parked(timeout)
            with self._gate:
                self._closed = True
                self._refresh_writable()
            self._lock.notify_all()
        self._stop.set()
        self._report_now.set()  # wakes the heartbeat thread, so close() does not wait out its interval
        self._commit_now.set()
        if getattr(self, "_committer", None) is not None:
            self._committer.join(timeout=max(timeout, 1.0))
            self._finish_own(timeout)
        else:
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

    def _wait_writable(self, topic: str, key: object = _UNRULED) -> _TopicState:
        """Wait until the topic takes every record, or (given the record's ``key``) until the fence
        it is in lets this record go or park."""
        started = time.monotonic()
        deadline = started + self.block_timeout
        stalled = False  # by a fence or a lapse (a commit of the producer's own is no stall)
        with self._lock:
            if topic not in self._topics:
                self._register_topic(topic)
            while True:
                if self._closed:
                    raise ProducerClosedError("the producer is closed; create a new one")
                state = self._topics[topic]
                lapsed = not self._liveness.holds(time.monotonic())
                if (
                    not state.fence.blocked
                    and not lapsed
                    and not self._held
                    and not self._committing
                    and not state.parked
                ):
                    break
                if (
                    key is not _UNRULED
                    and state.fence.blocked
                    and self._fenced(state, key, None, False) != _WAIT  # type: ignore[arg-type]
                ):
                    break
                stalled = stalled or state.fence.blocked or lapsed
                left = deadline - time.monotonic()
                if left <= 0:
                    if lapsed:
                        why = "has lost its liveness session"
                    elif state.fence.blocked:
                        why = f"is fenced for epoch {state.fence.epoch} of {topic!r}"
                    else:
                        why = self._held_why or "cannot commit its transaction (or send its records again)"
                    raise ProduceBlockedError(
                        f"producer {self.producer_id} {why} for over {self.block_timeout:g}s; "
                        "nothing was sent"
                    )
                self._lock.wait(min(left, 0.5))
        held = time.monotonic() - started
        if stalled and held > 0.001:
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
        """Update a topic's state from its history (with ``_lock`` held); True when a new fence must
        be acknowledged. A fence that ended hands its parked records over, by the count of now."""
        with self._gate:
            state.fence = state.fence.seen(history)
            if not state.fence.blocked:
                state.enter_epoch(history.active.epoch, history.active.partitions)
            self._refresh_writable()
            if state.parked and not state.fence.blocked:
                self._release_parked()
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
            state.writable = (
                writable(state.fence, self._liveness, self._closed, self._held) and not state.parked
            )
            state.staying = self._hashes is not None and staying_writable(
                state.fence, self._liveness, self._closed, self._held, self._own is not None
            )
            self._route(topic, state)

    def _fast_path(self, slow: Callable[..., None]) -> FastProduce | None:
        """produce()'s common case in one C call (ordo/_fastproduce.c), every other call handed to
        ``slow``; None without the C module, with another partitioner than murmur2, or with a
        delivery callback in the config that ordo's own transactions must hold per record."""
        if _FastProduce is None or self._hashes is None or self._default_delivery is not None:
            return None
        lease = self._lease
        assert not isinstance(lease, _PyLease)  # the C module's Lease, built with it
        own = self._own
        if own is None:
            return _FastProduce(self._routes, lease, self._producer.produce, slow)
        # while a commit runs, records wait in ``pending`` up to librdkafka's own queue bound
        limit = int(self._producer_config.get("queue.buffering.max.messages", 100_000))
        return _FastProduce(
            self._routes, lease, self._producer.produce, slow, own.entries, own.pending, limit
        )

    def _route(self, topic: str, state: _TopicState) -> None:
        """Open ``topic`` to produce()'s C path, or close it; call with ``_gate`` held.

        Open only while a record may need nothing but hash % count: writable, murmur2, and in a
        declared transaction only for a declared topic not yet aborted; during an acknowledged fence
        (``state.staying``) for staying keys only (the new count goes with the route). The partitions whose
        records need Python go with the count: those still to stamp in this epoch, and those a
        declared transaction leaves out (Python raises for them). The C path runs without
        releasing the GIL, so once this closes a route no record can take it with the old count."""
        scope = self._scope
        declared = scope.declaration.partitions.get(topic) if scope is not None else None
        if (
            not state.writable
            and state.staying
            and scope is None
            and state.parked_epoch in (-1, state.fence.epoch)
            and self._hashes is not None
        ):
            # an acknowledged fence: staying keys go on here, moved ones park in Python
            self._routes[topic] = (state.partitions, frozenset(state.unstamped), state.fence.partitions)
            return
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

    # -- ordo's own transactions (fencing="broker", ordo.own_transactions) --------------------

    def _producer_error(self, error: KafkaError) -> None:
        """The producer's error_cb: a fatal error (fenced) renews it at the committer's next turn."""
        if self._own is not None and error.fatal():
            self._fatal = self._producer
            self._commit_now.set()
        if self._user_error_cb is not None:
            self._user_error_cb(error)

    def _commit_loop(self) -> None:
        """Commits once a record has waited ``commit_interval`` uncommitted: counted from when
        this loop first saw the open transaction hold records (it looks every quarter interval),
        so a producer idle between bursts, or one that flushes more often, pays no commits of
        the loop's; and at once when woken (a fence found, a renewal or an abort due)."""
        own = self._own
        assert own is not None
        look = self.commit_interval / 4
        first_seen: float | None = None  # when the open transaction was first seen holding records
        last_turn = 0.0
        while not self._stop.is_set():
            woken = self._commit_now.wait(look)
            self._commit_now.clear()
            if self._stop.is_set():
                return
            now = time.monotonic()
            if first_seen is not None and self._committed_at >= first_seen:
                first_seen = None  # committed meanwhile (flush(), a fence): those records are written
            # records to send again, a producer to start or renew, a transaction to abort: a turn
            # an interval (a woken turn at once)
            chores = bool(own.resend) or self._renewal_due or self._abort_due
            if not woken and not (chores and now - last_turn >= self.commit_interval):
                if not own.entries and not own.pending:
                    continue
                if first_seen is None:
                    first_seen = now
                if now - first_seen < self.commit_interval:
                    continue
            last_turn = now
            try:
                self._commit_turn(self.block_timeout)
            except Exception:  # the next turn tries again; say why meanwhile
                _log.exception("producer %s: committing its transaction failed", self.producer_id)
            first_seen = time.monotonic() if own.entries or own.pending else None

    def _settled(self, fenced: Collection[str]) -> bool:
        """``_settle`` for the heartbeat thread, which must outlive any failure of it (it is the
        producer's liveness): a failure is no acknowledgement, said in the log."""
        try:
            return self._settle(fenced, self.session_timeout)
        except Exception:  # the next turn tries again
            _log.exception("producer %s: settling before a fence's acknowledgement failed", self.producer_id)
            return False

    def _settle(self, fenced: Collection[str], timeout: float) -> bool:
        """Whether every record of the ``fenced`` topics queued before now is written (committed,
        with ordo's own transactions): what acknowledging their fence promises. Records of an
        aborted transaction still to send again do not count: they go by the count the fence
        leads to; nor, with ordo's own transactions, do records the fence does not move (staying
        keys', keyless ones), which go on meanwhile. A commit hands over what was taken while it
        ran, so a second may be needed."""
        own = self._own
        if own is None:
            return int(self._producer.flush(timeout)) == 0
        for _turn in range(3):
            self._commit_turn(timeout)
            with self._gate:
                # staying records taken since the fence was applied may land after the thresholds
                fences = {
                    t: (s.partitions, s.fence.partitions)
                    for t in fenced
                    if (s := self._topics[t]).fence.partitions > 0 and self._hashes is not None
                }
                if not own.holds(fenced, fences):
                    return True
        return False

    def _commit_turn(self, timeout: float) -> bool:
        """Renew a fenced producer, send again what an abort left, commit the open transaction;
        True when it holds nothing uncommitted now. The held delivery callbacks of what was
        committed run here, once the commit lock is released."""
        own = self._own
        assert own is not None
        with self._commit_lock:
            reports = self._commit_locked(timeout)
        for callback, error, message in reports:
            try:
                callback(error, message)
            except Exception:  # one callback's failure must not cost the others
                _log.exception("producer %s: a delivery callback raised", self.producer_id)
        return not own.entries

    def _commit_locked(self, timeout: float) -> list[Report]:
        own = self._own
        assert own is not None
        self.poll(0)  # its log lines and errors (error_cb), which no commit may serve
        fatal, self._fatal = self._fatal, None
        if fatal is not None:
            self._must_renew(fatal)
        if self._renewal_due and not self._renew_producer():
            return []
        if self._abort_due:
            self._abort_stuck(timeout)
            return []
        if own.resend and self._epochs_stale:
            # an abort (a record failed, the coordinator timed the transaction out after a pause)
            # means this producer may have missed news: nothing goes again by a replaced count
            if not self._catch_up_epochs():
                return []
            self._epochs_stale = False
        if own.resend:
            self._send_again()
        if not own.entries:
            if not own.resend:
                self._set_held(False)
            return []
        self._set_committing(True)  # librdkafka refuses records while it commits: they wait
        producer = self._producer
        try:
            producer.commit_transaction(timeout)
        except KafkaException as error:
            self._commit_failed(producer, error.args[0], timeout)
            return []
        self._committed_at = time.monotonic()
        failed: KafkaException | None = None
        with self._lock:
            with self._gate:
                reports = own.committed()
                try:
                    producer.begin_transaction()
                    self._drain(producer)
                except KafkaException as error:  # failed for good just now: renewed below
                    failed = error
                self._set_committing_locked(False)
            self._lock.notify_all()
        if failed is not None:
            _log.warning("producer %s: cannot begin its next transaction: %s", self.producer_id, failed)
            self._must_renew(producer)  # what was taken meanwhile goes again with the new one
        elif not own.resend:
            self._set_held(False)
        return reports

    def _drain(self, producer: Producer) -> None:
        """Hand over what the C path took while the commit ran (with ``_gate`` held)."""
        fast, own = self._fast, self._own
        assert own is not None
        while fast is not None and own.pending:
            try:
                fast.drain()
            except BufferError:
                producer.poll(0.05)  # librdkafka's queue is full: serve it, then hand the rest over

    def _set_committing(self, committing: bool) -> None:
        with self._lock:
            with self._gate:
                self._set_committing_locked(committing)
            self._lock.notify_all()

    def _set_committing_locked(self, committing: bool) -> None:
        self._committing = committing
        if self._fast is not None:
            self._fast.buffering = committing

    def _commit_failed(self, producer: Producer, error: KafkaError, timeout: float) -> None:
        remedy = after_failure(error)
        _log.warning("producer %s: commit failed (%s): %s", self.producer_id, error.str(), remedy.value)
        if remedy == Remedy.RETRY:
            return  # the transaction is intact: the next turn commits it again
        if remedy == Remedy.RESEND:
            try:
                producer.abort_transaction(timeout)
            except KafkaException as abort_error:
                if after_failure(abort_error.args[0]) == Remedy.RENEW:
                    self._must_renew(producer)
                return  # otherwise the next turn's commit fails again and aborts again
            with self._lock, self._gate:
                self._aborted()
            producer.begin_transaction()
            self._commit_now.set()
            return
        self._must_renew(producer)

    def _aborted(self) -> None:
        """The open transaction is gone: its records go again (first records of each partition
        stamped again: the stamped ones were aborted); call with ``_lock`` and ``_gate`` held."""
        assert self._own is not None
        self._own.aborted()
        self._epochs_stale = True
        for state in self._topics.values():
            state.unstamped = set(range(state.partitions))
        self._set_committing_locked(False)
        self._held = True
        self._refresh_writable()

    def _must_abort(self, stuck: Producer) -> None:
        """``stuck`` (the producer of now) refused a record with _STATE outside a commit: its
        transaction is in an abortable state. The committer aborts it and sends its records again."""
        with self._lock:
            with self._gate:
                if stuck is not self._producer or self._renewal_due or self._abort_due:
                    return
                self._abort_due = True
                self._held = True
                self._refresh_writable()
            self._lock.notify_all()
        self._commit_now.set()

    def _abort_stuck(self, timeout: float) -> None:
        """Abort a transaction that takes no more records (``_must_abort``); tried again at the
        next turn while the abort itself cannot be done."""
        producer = self._producer
        try:
            producer.abort_transaction(timeout)
        except KafkaException as error:
            if after_failure(error.args[0]) == Remedy.RENEW:
                self._abort_due = False
                self._must_renew(producer)
            else:
                _log.warning("producer %s: cannot abort its transaction yet: %s", self.producer_id, error)
            return
        self._abort_due = False
        _log.warning(
            "producer %s: its transaction took no more records; aborted, sending again", self.producer_id
        )
        with self._lock, self._gate:
            self._aborted()
        producer.begin_transaction()
        self._commit_now.set()

    def _must_renew(self, failed: Producer) -> None:
        """``failed`` (the producer of now, else nothing is done) was fenced or failed for good:
        its transaction is lost, its records go again once a new producer is open."""
        with self._lock:
            with self._gate:
                if failed is not self._producer or self._renewal_due:
                    return
                self._renewal_due = True
                self._abort_due = False  # the new producer's transaction starts clean
                self._aborted()
            self._lock.notify_all()
        self._commit_now.set()

    def _renew_producer(self) -> bool:
        """Start the first producer's transactions, or open a new producer for the same
        transactional.id (its init_transactions fences the old one for good and aborts what it
        left open) after the epoch log is read to its end: whoever fenced this producer wrote a
        fence there first, so nothing goes again by a count it replaced. False when Kafka cannot
        be reached now (the next turn tries again; produce() says why once it gives up)."""
        if self._started and not self._catch_up_epochs():
            _log.warning("producer %s: fenced; cannot read the epoch log yet", self.producer_id)
            return False
        producer = self._producer if not self._started else Producer(self._producer_config)
        try:
            producer.init_transactions(self.session_timeout)
            producer.begin_transaction()
        except KafkaException as error:
            self._held_why = (
                f"cannot start transactions as {self.transactional_id!r} ({error.args[0].str()}): it "
                "needs Write and Describe on transactional ids prefixed 'ordo-producer.' "
                "(docs/security.md), or fencing='lease'"
            )
            _log.warning("producer %s: %s; retrying", self.producer_id, self._held_why)
            return False
        self._held_why = ""
        if not self._started:
            self._started, self._renewal_due = True, False
            return True
        old = self._producer
        with self._gate:
            self._producer = producer
            if self._fast is not None:
                self._fast.raw = producer.produce
            self._renewal_due = False
        with contextlib.suppress(KafkaException, RuntimeError):
            old.purge()  # what it still queued was aborted with its transaction
        metrics.producer_renewed(self.producer_id)
        _log.warning(
            "producer %s: fenced through the broker (its transaction aborted); reopened, sending "
            "%d record(s) again",
            self.producer_id,
            len(self._own or ()),
        )
        return True

    def _send_again(self) -> None:
        """Hand the records of aborted transactions over again, oldest first, each by the count of
        now; stops at one whose topic takes no records now (a fence: it goes once that ends)."""
        own = self._own
        assert own is not None
        while own.resend:
            entry = own.resend[0]
            if len(entry) == 5:  # write_beside's: its own partition, no placement, no fence
                with self._gate:
                    self._hand_beside(own, entry, resending=True)
                continue
            topic, value, key, partition, on_delivery, timestamp, headers = (
                entry if len(entry) == 7 else (*entry, None, None, 0, None)
            )
            if not self._produce(topic, value, key, partition, on_delivery, timestamp, headers, True):
                return

    def _set_held(self, held: bool) -> None:
        """Hold produce() (a commit, records to send again) or let it go."""
        with self._lock:
            with self._gate:
                if self._held == held:
                    return
                self._held = held
                self._refresh_writable()
            self._lock.notify_all()

    def _finish_own(self, timeout: float) -> None:
        """At close: commit what is open; what cannot be written is reported failed, not dropped."""
        own = self._own
        assert own is not None
        self._commit_turn(timeout)
        if not len(own):
            return
        with self._gate:
            lost = own.give_up()
        self._fail_at_close(
            lost, "waited for its transaction to commit", "their transaction could not commit", timeout
        )
        with contextlib.suppress(KafkaException):
            self._producer.abort_transaction(min(timeout, 5.0))

    # -- registry ----------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        interval = self.session_timeout / 3
        while not self._stop.is_set():
            fenced = self._pending_fences()
            if fenced and not self._settled(fenced):
                # Records sent before the fence are not all written yet: acknowledging now would
                # let the thresholds be read before them. Report liveness only; the next turn
                # tries again (a fence that times out is aborted by the operator, or the
                # operator fences this producer through the broker).
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
        if not self._catch_up_epochs():
            _log.error(
                "producer %s: cannot read the epoch log after a lapse; still stopped", self.producer_id
            )
            return False
        return True

    def _catch_up_epochs(self) -> bool:
        """Read the epoch log to its end and apply every topic's history (a fence found is
        acknowledged by the heartbeat at once); False when it cannot be read within a session."""
        if not self._log.catch_up(self.session_timeout):
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
            transactional_id=self.transactional_id,
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
