# GroupProducer is over 450 lines on purpose for now: its plan, checkpoints, lapse and idle rules
# are pure modules beside it; what is left is the member loop around one lock.
"""GroupProducer: one member of a ProducerGroup (KIP-509).

The operator assigns source partitions to member pods; this class follows the assignment, tells
the application what it got (with each partition's last checkpoint) and what it lost, and writes
each source partition's data with its checkpoint. A revoked partition accepts no new transaction;
once its open transaction ended (or the session's time is up) its producer is closed and the
generation acknowledged, and only then does the operator hand the partition to another member.

A member that owns partitions and neither calls ``alive()`` nor commits a unit within the group's
``maxIdleSeconds`` steps out: it aborts its open units, gives its Lease up and tells the
application its partitions are lost; the operator moves them at once. ``alive()`` brings it back.

A unit whose producer fails (fenced or another fatal error) loses its partition at once; unless a
newer owner has it (``plan_retake``), the member takes it back after a growing wait.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from kubernetes.client import ApiClient

from .._clients import bounded_delivery, drain, logged
from ..control_topics import DEFAULT_CHECKPOINT_TOPIC, DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC
from ..epochs.log import EpochLog, refuse_unread
from ..errors import ConfigError, DeliveryError, NotOwnedError, ProducerClosedError, TransactionScopeError
from ..kube_credentials import kubernetes_client
from ..member_wire import GroupSettings, MemberAssignment, checkpoint_key, transactional_id
from ..ordered_producer import OrderedProducer
from .checkpoints import Checkpoint, CheckpointLog, ensure_checkpoint_topic
from .idle import IdleClock
from .membership import Membership
from .plan import AssignmentPlan, UnitFailure, plan_assignment, plan_retake, retake_delay
from .transaction import SourceTransaction, unit_transaction_timeout_ms

__all__ = ["GroupProducer", "Rebalance"]

_log = logging.getLogger(__name__)
DEFAULT_SETTINGS = GroupSettings(
    session_timeout_seconds=30, exactly_once=True, checkpoint_topic=DEFAULT_CHECKPOINT_TOPIC
)
Listener = Callable[["Rebalance"], None]


@dataclass(frozen=True)
class Rebalance:
    """What changed for this member in one assignment generation, and where it stands now."""

    generation: int
    assigned: dict[int, str | None] = field(default_factory=dict)
    """Newly assigned source partitions → their last committed checkpoint (None: start afresh)."""
    revoked: list[int] = field(default_factory=list)
    """Source partitions handed back; they accept no new transaction."""
    lost: list[int] = field(default_factory=list)
    """Source partitions taken away without a handoff: fenced by a new owner, the Lease lost, or
    the member idle past the group's ``maxIdleSeconds``."""
    assignment: dict[int, str | None] = field(default_factory=dict)
    """Every source partition this member owns after the event → its last committed checkpoint
    (KIP-509's partition map): the whole current map, not only what changed."""
    retaking: dict[int, float] = field(default_factory=dict)
    """Of ``lost``: the partitions the member takes back by itself (their unit's producer failed
    and no newer owner has them) → seconds until it tries; an ``assigned`` event with the
    checkpoint to resume from follows once it has."""


@dataclass
class _Slot:
    producer: OrderedProducer
    open: SourceTransaction | None = None
    revoking: bool = False


class GroupProducer:
    """A ProducerGroup member. Build it with :meth:`from_env` inside a pod."""

    def __init__(
        self,
        kafka_config: Mapping[str, Any],
        *,
        namespace: str,
        pod: str,
        group: str,
        api_client: ApiClient,
        listener: Listener | None = None,
        partitioner: str = "murmur2",
        epoch_topic: str = DEFAULT_EPOCH_TOPIC,
        registry_topic: str = DEFAULT_REGISTRY_TOPIC,
        block_timeout: float = 60.0,
    ) -> None:
        """``block_timeout``: how long a unit's ``produce()`` may wait in a fence (its producers'
        own); a unit's transaction timeout covers it (``unit_transaction_timeout_ms``)."""
        if "bootstrap.servers" not in kafka_config:
            raise ConfigError("kafka_config needs bootstrap.servers")
        if "transactional.id" in kafka_config:
            raise ConfigError(
                "do not set transactional.id: GroupProducer uses one per source partition "
                "(ordo.<namespace>.<group>.<partition>) so that a new owner fences the old one"
            )
        self.namespace, self.pod, self.group = namespace, pod, group
        self._kafka = dict(kafka_config)
        self._partitioner = partitioner
        self._registry_topic = registry_topic
        self._block_timeout = block_timeout
        self._listener = listener
        # polled after each use (drain): that hands over its log lines
        self._admin = AdminClient(logged(self._kafka))
        try:
            self._admin.list_topics(timeout=5)
        except KafkaException as error:
            raise ConfigError(
                f"cannot reach Kafka at {self._kafka['bootstrap.servers']}: {error.args[0]}"
            ) from None
        finally:
            drain(self._admin)
        self._epoch_log = EpochLog(self._kafka, epoch_topic)
        try:
            refuse_unread(self._epoch_log, self._kafka["bootstrap.servers"])
        except ConfigError:
            self._epoch_log.close()
            raise
        lock = threading.RLock()
        self._lock = threading.Condition(lock)  # the member's state; the idle watch waits on it
        # the same lock: a unit ended or the owned partitions changed (_await_idle waits on it);
        # apart so that a unit's end wakes no idle watch (a thread switch per transaction)
        self._units_changed = threading.Condition(lock)
        self._slots: dict[int, _Slot] = {}
        self._target: frozenset[int] = frozenset()  # what the applied assignment gives the member
        # partitions lost to a failed producer that the member takes back -> the attempt's token
        self._retaking: dict[int, object] = {}
        self._failures: dict[int, int] = {}  # failed units in a row since the partition's last commit
        # one change of what the member holds at a time: an assignment or a partition taken back
        self._applying = threading.Lock()
        self._generation = -1
        self._settings: GroupSettings | None = None
        self._checkpoints: CheckpointLog | None = None
        self._shared: OrderedProducer | None = None  # at-least-once: one idempotent producer
        self._events: queue.Queue[Rebalance] = queue.Queue()
        self._closed = False
        self._idle = IdleClock(DEFAULT_SETTINGS.max_idle_seconds)
        self._stepped_out = False  # idle past the limit: Lease given up until alive() is called
        self._units = _Units(self)
        self._membership = Membership(
            api_client, namespace, pod, group, on_assignment=self._on_assignment, on_lost=self._on_lost
        )
        self._idle_watch = threading.Thread(target=self._watch_idle, name="ordo-idle-watch", daemon=True)
        self._idle_watch.start()

    @classmethod
    def from_env(
        cls, kafka_config: Mapping[str, Any], *, handle_sigterm: bool = True, **options: Any
    ) -> GroupProducer:
        """A member named by POD_NAME, POD_NAMESPACE and ORDO_GROUP, with in-cluster credentials
        (or the kubeconfig outside a cluster). With ``handle_sigterm``, SIGTERM ends the process
        cleanly: ``with`` blocks unwind (open transactions abort) and the Lease is released at exit,
        so the partitions move at once."""
        missing = [v for v in ("POD_NAME", "POD_NAMESPACE", "ORDO_GROUP") if not os.environ.get(v)]
        if missing:
            raise ConfigError(
                f"environment variable(s) {', '.join(missing)} not set: give the pod POD_NAME and "
                "POD_NAMESPACE from the downward API (metadata.name, metadata.namespace) and ORDO_GROUP "
                "= the ProducerGroup's name"
            )
        member = cls(
            kafka_config,
            namespace=os.environ["POD_NAMESPACE"],
            pod=os.environ["POD_NAME"],
            group=os.environ["ORDO_GROUP"],
            api_client=kubernetes_client(),
            **options,
        )
        if handle_sigterm and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _exit_on_sigterm)
            atexit.register(member.close)
        return member

    # -- the application's side --------------------------------------------------------------

    def subscribe(self, timeout: float | None = None) -> Iterator[Rebalance]:
        """Rebalance events as they happen (KIP-509's subscribe); ends when the member closes,
        or after ``timeout`` seconds without an event."""
        while not self._closed:
            try:
                yield self._events.get(timeout=timeout if timeout is not None else 0.5)
            except queue.Empty:
                if timeout is not None:
                    return

    def owned(self) -> list[int]:
        """Source partitions this member may produce now."""
        with self._lock:
            return sorted(p for p, s in self._slots.items() if not s.revoking)

    def alive(self) -> bool:
        """KIP-509's alive call: the application says it is still working. Call it where the copy
        loop waits for new source data; a member that owns partitions and neither calls it nor
        commits a unit within the group's ``maxIdleSeconds`` gives them up (a ``lost`` event).
        Returns whether the member holds its session; False also when it had stepped out for
        idleness: this call brings it back, and its partitions come with a later event."""
        with self._lock:
            self._idle.touch(time.monotonic())
            stepped_out, self._stepped_out = self._stepped_out, False
        if stepped_out and not self._closed:
            _log.warning("member %s: alive() again after stepping out for idleness; rejoining", self.pod)
            self._membership.step_in()
            return False
        return not self._closed and not self._membership.lost

    def checkpoint(self, source_partition: int) -> str | None:
        """The last committed checkpoint of a source partition."""
        log = self._checkpoints
        if log is None:
            return None
        found = log.of(self.namespace, self.group, source_partition)
        return found.checkpoint if found else None

    def transaction(self, source_partition: int) -> SourceTransaction:
        """Begin a unit of work for a source partition this member owns."""
        self._ensure_lease()
        with self._lock:
            if self._closed:
                raise ProducerClosedError("the GroupProducer is closed")
            slot = self._owned_slot(source_partition)
            if slot.open is not None:
                raise TransactionScopeError(
                    f"a transaction of source partition {source_partition} is already open; "
                    "commit or abort it first"
                )
            settings = self._settings or DEFAULT_SETTINGS
            tx = SourceTransaction(
                self._units,
                source_partition,
                self._generation,
                slot.producer,
                settings.exactly_once,
                settings.checkpoint_topic,
                self._membership.clock,
            )
            slot.open = tx
        tx.begin()
        return tx

    def close(self, timeout: float = 30.0) -> None:
        """Stop producing, acknowledge, release the Lease (the partitions move at once)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for slot in self._slots.values():
                slot.revoking = True
            self._lock.notify_all()  # the idle watch ends
        self._await_idle(list(self._slots), timeout)
        with self._lock:
            slots, self._slots = dict(self._slots), {}
            self._units_changed.notify_all()
        self._abort_open(slots.values())
        self._close_producers(slots.values(), timeout)
        if self._generation >= 0:
            try:
                self._membership.ack(self._generation)
            except Exception as error:  # releasing is what matters now
                _log.warning("member %s: final acknowledgement failed: %s", self.pod, error)
        self._membership.release()
        if self._shared is not None:
            self._shared.close(timeout)
        if self._checkpoints is not None:
            self._checkpoints.close()
        self._epoch_log.close()
        drain(self._admin)

    def __enter__(self) -> GroupProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- assignment changes (on the membership's watch thread) -------------------------------

    def _on_assignment(self, assignment: MemberAssignment | None) -> None:
        with self._applying:
            self._apply(assignment)

    def _apply(self, assignment: MemberAssignment | None) -> None:
        """Apply an assignment (``plan_assignment`` says what to release, take and acknowledge):
        hand back, adopt the settings, open the producers of what is taken, read the checkpoints,
        announce, acknowledge."""
        if self._closed:
            return
        with self._lock:
            plan = plan_assignment(
                assignment, self._slots, self._settings, DEFAULT_SETTINGS, self._generation, self._stepped_out
            )
            for p in plan.release:
                self._slots[p].revoking = True
            self._target = plan.target
            for p in [p for p in self._failures if p not in plan.target]:
                del self._failures[p]
            self._lock.notify_all()  # a partition waiting to be taken back that left: its wait ends
        if plan.restart:
            _log.warning(
                "member %s: the group's settings changed (%s); restarting its partitions under them",
                self.pod,
                plan.settings,
            )
        self._release(list(plan.release), plan.settings.session_timeout_seconds)
        revoked = list(plan.release)
        if plan.restart and revoked:
            self._deliver(Rebalance(plan.generation, revoked=revoked, assignment=self._current()))
            revoked = []
        assigned = self._take(plan, self._adopt(plan.settings))
        if assigned is None:
            return  # closed meanwhile
        event = Rebalance(
            generation=plan.generation,
            assigned={p: self.checkpoint(p) for p in assigned},
            revoked=revoked,
            assignment=self._current(),
        )
        self._deliver(event)
        if plan.acknowledge is not None:
            self._membership.ack(plan.acknowledge)

    def _take(self, plan: AssignmentPlan, log: CheckpointLog) -> list[int] | None:
        """Take what ``plan`` assigns and the member lacks: open its producers (exactly-once: that
        fences the previous owner), read the checkpoints (at-least-once: claim the partitions
        first), hold them. The partitions taken, or None if the member closed meanwhile."""
        settings = plan.settings
        with self._lock:
            # a partition waiting to be taken back is its attempt's, after its backoff
            assigned = plan.to_take(self._slots.keys() | self._retaking.keys())
        producers = self._open_producers(assigned, settings)
        # The new owner's transactional producers are initialised (any transaction left open by
        # the previous owner is aborted), so the checkpoint topic can be read to its end now; also
        # when only kept partitions are left: the event shows their latest checkpoints too.
        if not self._read_checkpoints(log, settings, bool(assigned or self.owned())):
            return None
        if assigned and not settings.exactly_once:
            stale = self._take_over(assigned, plan.generation, log, settings)
            if stale is None:
                return None
            assigned = [p for p in assigned if p not in stale]
            producers = {p: producer for p, producer in producers.items() if p not in stale}
        with self._lock:
            unused = dict(producers) if self._stepped_out else {}  # stepped out meanwhile
            for p, producer in producers.items():
                if p not in unused:
                    self._slots[p] = _Slot(producer)
            self._owned_changed()
            if plan.acknowledge is not None:
                self._generation = plan.acknowledge
        self._close_producers(_Slot(producer) for producer in unused.values())
        return [p for p in assigned if p not in unused]

    def _release(self, partitions: list[int], timeout: float) -> None:
        """Hand ``partitions`` back (marked revoking): wait up to ``timeout`` for their open units
        to end, withdraw those still open, close their producers."""
        self._await_idle(partitions, timeout)
        with self._lock:
            gone = [self._slots.pop(p) for p in partitions if p in self._slots]
            for slot in gone:
                if slot.open is not None:  # still open past the wait: its unit cannot commit now
                    slot.open.withdraw("revoked while its transaction was still open")
            self._owned_changed()
        self._close_producers(gone, 10)

    def _read_checkpoints(self, log: CheckpointLog, settings: GroupSettings, needed: bool) -> bool:
        """Read the checkpoint topic to its end (if ``needed``); False if the member closed meanwhile."""
        while needed and not log.catch_up(settings.session_timeout_seconds):
            if self._closed:
                return False
            _log.warning("member %s: checkpoint topic not read to its end yet; waiting", self.pod)
        return True

    def _take_over(
        self, partitions: list[int], generation: int, log: CheckpointLog, settings: GroupSettings
    ) -> list[int] | None:
        """At-least-once: nothing fences the previous owners, so before its first unit the member
        writes a takeover record per partition in its generation and reads the topic through
        them: whatever a previous owner wrote before them it continues from; whatever after, every
        reader refuses (older generation). Returns the partitions a newer generation already holds
        (this assignment is stale; a newer one follows), or None if the member closed meanwhile."""
        read = {p: log.of(self.namespace, self.group, p) for p in partitions}
        claims = {p: Checkpoint.takeover_of(read[p], self.pod, generation) for p in partitions}
        self._write_checkpoints(claims, settings)
        if not self._read_checkpoints(log, settings, True):
            return None
        stale: list[int] = []
        moved: dict[int, Checkpoint] = {}  # a checkpoint landed between the first read and the claim
        for p in partitions:
            now = log.of(self.namespace, self.group, p)
            if now is None or now.generation > generation:
                stale.append(p)
            elif now.checkpoint is not None and now.checkpoint != claims[p].checkpoint:
                # written again as this member's own: once compaction removes what came before
                # the claim, a reader finding the claim alone restarts from the same point
                moved[p] = Checkpoint.now(now.checkpoint, self.pod, generation)
        if moved:
            self._write_checkpoints(moved, settings)
        if stale:
            _log.warning(
                "member %s: source partitions %s are held by a newer generation than %d; not taking them",
                self.pod,
                stale,
                generation,
            )
        return stale

    def _write_checkpoints(self, records: Mapping[int, Checkpoint], settings: GroupSettings) -> None:
        """Write checkpoint records on the member's idempotent producer (at-least-once) and wait
        for each to be acknowledged; DeliveryError otherwise (the assignment is applied again)."""
        assert self._shared is not None  # opened for the partitions taken
        outcome: list[KafkaError | None] = []
        for p, record in records.items():
            key = checkpoint_key(self.namespace, self.group, p)
            # in the shared producer's own transaction (if it has one): committed in order with
            # the data before it, reported once committed
            self._shared.write_beside(
                settings.checkpoint_topic,
                record.encode(),
                key,
                0,
                on_delivery=lambda e, _m: outcome.append(e),
            )
        self._shared.flush(settings.session_timeout_seconds)
        failed = [error for error in outcome if error is not None]
        if failed or len(outcome) < len(records):
            raise DeliveryError(
                f"member {self.pod}: checkpoint records of source partitions {sorted(records)} were not "
                f"written ({failed[0] if failed else 'timed out'}); the assignment is applied again"
            )

    def _adopt(self, settings: GroupSettings) -> CheckpointLog:
        """Take the group's settings: the timeouts at once; the mode and the checkpoint topic by
        opening the checkpoint reader (and dropping the producers of the old ones: the caller
        handed their partitions back first)."""
        with self._lock:
            self._idle.change_limit(settings.max_idle_seconds, time.monotonic())
            self._lock.notify_all()  # the idle watch computes its deadline again
        log = self._checkpoints
        if self._settings is not None and log is not None and settings.same_producers(self._settings):
            self._settings = settings
            return log
        if self._shared is not None:
            self._shared.close(10)
            self._shared = None
        if log is not None:
            log.close()
        try:
            ensure_checkpoint_topic(self._admin, settings.checkpoint_topic)
        finally:
            drain(self._admin)
        self._checkpoints = log = CheckpointLog(self._kafka, settings.checkpoint_topic, settings.exactly_once)
        self._settings = settings
        return log

    def _open_producers(self, partitions: list[int], settings: GroupSettings) -> dict[int, OrderedProducer]:
        if not settings.exactly_once:
            if not partitions:
                return {}
            if self._shared is None:  # at-least-once: one idempotent producer for every partition
                self._shared = self._ordered_producer(
                    {**self._kafka, "enable.idempotence": True}, f"{self.namespace}/{self.pod}"
                )
            return dict.fromkeys(partitions, self._shared)

        def open_one(p: int) -> OrderedProducer:
            config = {**self._kafka, "transactional.id": transactional_id(self.namespace, self.group, p)}
            config["transaction.timeout.ms"] = unit_transaction_timeout_ms(
                config, self._block_timeout, bounded_delivery(config)[1]
            )
            producer = self._ordered_producer(config, f"{self.namespace}/{self.pod}/{p}")
            try:
                producer.init_transactions(settings.session_timeout_seconds + 30)  # fences the old owner
            except KafkaException as error:
                producer.close(5)
                if error.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT:
                    raise ConfigError(
                        f"the broker refuses transaction.timeout.ms={config['transaction.timeout.ms']} "
                        "(more than its transaction.max.timeout.ms): raise the broker's limit, or set "
                        "transaction.timeout.ms in kafka_config to at most it (a unit that waits in a "
                        "fence past it is aborted and re-done)"
                    ) from None
                raise
            except BaseException:
                producer.close(5)
                raise
            return producer

        if not partitions:
            return {}
        with ThreadPoolExecutor(max_workers=min(8, len(partitions))) as pool:
            futures = {p: pool.submit(open_one, p) for p in partitions}
        errors = {p: error for p, f in futures.items() if (error := f.exception()) is not None}
        if errors:  # none is taken: the assignment is applied again, from the start
            for p, future in futures.items():
                if p not in errors:
                    future.result().close(5)
            raise next(iter(errors.values()))
        return {p: f.result() for p, f in futures.items()}

    def _ordered_producer(self, config: Mapping[str, Any], producer_id: str) -> OrderedProducer:
        return OrderedProducer(
            config,
            partitioner=self._partitioner,
            producer_id=producer_id,
            epoch_log=self._epoch_log,
            registry_topic=self._registry_topic,
            block_timeout=self._block_timeout,
        )

    def _abort_open(self, slots: Iterable[_Slot]) -> None:
        """Abort what is still open when the member closes: no next owner may come to fence it
        (the group scaled down, or deleted), and read_committed readers of the checkpoint topic and
        of every partition it wrote would wait for the broker's transaction timeout."""
        for slot in slots:
            tx = slot.open
            if tx is None:
                continue
            _log.warning(
                "member %s: aborting the open transaction of source partition %d", self.pod, tx.partition
            )
            try:
                tx.abort()
            except Exception as error:  # closing goes on: the broker's timeout ends it then
                _log.warning(
                    "member %s: abort of source partition %d failed: %s", self.pod, tx.partition, error
                )

    def _close_producers(self, slots: Iterable[_Slot], timeout: float = 5.0) -> None:
        for slot in slots:
            if slot.producer is not self._shared:
                slot.producer.close(timeout)

    def _on_lost(self) -> None:
        """The Lease expired under us: the operator may already have moved everything."""
        self._give_up_everything("its Lease was not renewed within the session")

    def _give_up_everything(self, reason: str) -> None:
        """Stop at once: no unit of any partition may commit now (late writes are refused here
        and, exactly-once, aborted and fenced in Kafka), then tell the application."""
        with self._lock:
            lost, slots = sorted(self._slots), list(self._slots.values())
            self._slots = {}
            # nothing is taken back: the assignment applied again takes what is the member's
            self._retaking.clear()
            self._target = frozenset()
            self._owned_changed()
            for slot in slots:
                if slot.open is not None:
                    slot.open.withdraw(reason)
        if lost:
            _log.error("member %s: gives up source partitions %s: %s", self.pod, lost, reason)
            self._deliver(Rebalance(self._generation, lost=lost, assignment=self._current()))
        self._abort_open(slots)  # no next owner may come soon: read_committed readers must not wait
        self._close_producers(slots)

    # -- the idle limit (on its own thread) --------------------------------------------------

    def _watch_idle(self) -> None:
        with self._lock:
            while not self._closed:
                left = self._idle.left(time.monotonic())
                if left is not None and left <= 0:
                    self._idle.stop()
                    self._stepped_out = True
                    self._lock.release()
                    try:
                        self._step_out()
                    finally:
                        self._lock.acquire()
                    continue
                self._lock.wait(left)

    def _step_out(self) -> None:
        limit = self._idle.limit
        self._membership.step_out()  # first: the operator moves the partitions at once
        self._give_up_everything(
            f"no alive() call and no committed unit for {limit:g}s (the group's maxIdleSeconds); "
            "alive() brings the member back"
        )

    def _owned_changed(self) -> None:
        """Under the lock: the idle clock runs while the member owns partitions."""
        if self._slots:
            self._idle.start(time.monotonic())
        else:
            self._idle.stop()
        self._lock.notify_all()
        self._units_changed.notify_all()

    def _current(self) -> dict[int, str | None]:
        """Every partition owned now → its last committed checkpoint."""
        return {p: self.checkpoint(p) for p in self.owned()}

    def _deliver(self, event: Rebalance) -> None:
        self._events.put(event)
        if self._listener is not None:
            try:
                self._listener(event)
            except Exception:
                _log.exception("member %s: the rebalance listener failed", self.pod)

    # -- called by transactions --------------------------------------------------------------

    def _owned_slot(self, partition: int) -> _Slot:
        slot = self._slots.get(partition)
        if slot is None and partition in self._retaking:
            raise NotOwnedError(
                f"source partition {partition} is being taken back by member {self.pod} after its "
                "producer failed; an `assigned` event gives the checkpoint to resume from once it is"
            )
        if slot is None or slot.revoking:
            raise NotOwnedError(
                f"source partition {partition} is not assigned to member {self.pod} "
                f"(it owns {sorted(p for p, s in self._slots.items() if not s.revoking)})"
            )
        return slot

    def _ensure_lease(self) -> None:
        """Raise NotOwnedError once the Lease may have expired under this member (its process
        was stopped past the session): the partitions are given up first (``Membership.lapsed``),
        so nothing more of them is produced, whatever moved them meanwhile."""
        if self._membership.lapsed():
            raise NotOwnedError(
                f"member {self.pod}: its Lease was not renewed within the session, so its source "
                "partitions may belong to another member now; it gave them up (a later event "
                "assigns them again if they are still its own)"
            )

    def _unit_failed(self, unit: SourceTransaction, reason: str) -> str:
        """A unit's producer can no longer be used (``reason``): its partition leaves the member
        at once (its unit can no longer commit; a ``lost`` event). ``plan_retake`` says whether a
        newer owner has it; if not, the member takes it back after a backoff (``_retake``).
        Returns what the member does, for the error the application gets."""
        p = unit.partition
        with self._lock:
            slot = self._slots.get(p)
            if slot is None or slot.open is not unit:
                return "the partition had already left the member"
            del self._slots[p]
            self._owned_changed()
            self._failures[p] = failures = self._failures.get(p, 0) + 1
            plan = plan_retake(self._failure_facts(p, failures, assigned=not slot.revoking))
            token = object()
            if plan.retake:
                self._retaking[p] = token
        threading.Thread(target=slot.producer.close, args=(2.0,), daemon=True).start()
        if plan.retake:
            _log.warning(
                "member %s: the producer of source partition %d failed (%s); %s (attempt %d)",
                self.pod, p, reason, plan.why, failures,
            )  # fmt: skip
            self._retake_later(p, plan.delay, token)
        else:
            _log.warning("member %s: source partition %d dropped (%s): %s", self.pod, p, reason, plan.why)
        retaking = {p: plan.delay} if plan.retake else {}
        self._deliver(Rebalance(self._generation, lost=[p], assignment=self._current(), retaking=retaking))
        if plan.retake:
            return (
                f"no newer owner has it, so the member takes it back in {plan.delay:g}s (a `lost` event "
                "now, then `assigned` with the checkpoint to resume from)"
            )
        return f"the partition is dropped: {plan.why}"

    def _failure_facts(self, partition: int, failures: int, assigned: bool = True) -> UnitFailure:
        """Under the lock: what ``plan_retake`` decides from, as the member knows it now."""
        settings = self._settings or DEFAULT_SETTINGS
        log = self._checkpoints
        read = log.of(self.namespace, self.group, partition) if log is not None else None
        return UnitFailure(
            exactly_once=settings.exactly_once,
            assigned=assigned
            and partition in self._target
            # past its Lease clock the member is about to give everything up (not here: this may
            # run inside that, under the Lease's lapse lock); the assignment applied again takes
            # the partition then
            and not (self._closed or self._stepped_out or self._membership.lost)
            and not self._membership.clock.lapsed(time.monotonic()),
            generation=self._generation,
            checkpoint_generation=read.generation if read is not None else None,
            failures=failures,
        )

    def _retake_later(self, partition: int, delay: float, token: object) -> None:
        threading.Thread(
            target=self._retake_after,
            args=(partition, delay, token),
            name=f"ordo-retake-{partition}",
            daemon=True,
        ).start()

    def _retake_after(self, partition: int, delay: float, token: object) -> None:
        """Wait ``delay`` (closing, giving everything up or an assignment without the partition
        ends the wait), then try to take the partition back."""
        with self._lock:
            self._lock.wait_for(
                lambda: (
                    self._closed
                    or self._retaking.get(partition) is not token
                    or partition not in self._target
                ),
                delay,
            )
        try:
            self._retake(partition, token)
        except Exception as error:  # a thread of its own: nothing above it would say it
            if self._closed:
                return  # its readers and clients were closed under it
            _log.exception("member %s: taking source partition %d back failed", self.pod, partition)
            self._retake_failed(partition, token, repr(error))

    def _retake(self, partition: int, token: object) -> None:
        """Take ``partition`` back as an assignment would: its producer opened for the same
        transactional id (that aborts what the failed one left open), the checkpoint topic read to
        its end, then ``assigned`` with the checkpoint to resume from. ``plan_retake`` is asked
        again on what was read: a newer owner's checkpoint may have come meanwhile."""
        with self._applying:
            if self._membership.lapsed():
                return  # it gave everything up; the assignment applied again takes the partition
            with self._lock:
                if self._closed or self._retaking.get(partition) is not token:
                    return
                settings, log = self._settings or DEFAULT_SETTINGS, self._checkpoints
            if log is None or not self._read_checkpoints(log, settings, True):
                return
            if not self._still_retaking(partition, token):
                return
            try:
                producer = self._open_producers([partition], settings)[partition]
            except Exception as error:  # Kafka away, or refusing: a later attempt
                self._retake_failed(partition, token, str(error))
                return
            taken = False
            try:
                # read after the new producer fenced the failed one: whatever it committed is in
                if self._read_checkpoints(log, settings, True) and self._still_retaking(partition, token):
                    with self._lock:
                        ours = self._retaking.get(partition) is token
                        if ours:
                            del self._retaking[partition]
                        taken = ours and not self._closed
                        if taken:
                            self._slots[partition] = _Slot(producer)
                            self._owned_changed()
            finally:
                if not taken:
                    producer.close(5)
            if not taken:
                return
            _log.warning(
                "member %s: source partition %d taken back after its producer failed", self.pod, partition
            )
            self._deliver(
                Rebalance(
                    self._generation,
                    assigned={partition: self.checkpoint(partition)},
                    assignment=self._current(),
                )
            )

    def _still_retaking(self, partition: int, token: object) -> bool:
        """``plan_retake`` again, on what the member knows now; ends the attempt if not."""
        with self._lock:
            if self._retaking.get(partition) is not token:
                return False
            plan = plan_retake(self._failure_facts(partition, self._failures.get(partition, 1)))
            if not plan.retake:
                del self._retaking[partition]
        if not plan.retake:
            _log.warning("member %s: source partition %d not taken back: %s", self.pod, partition, plan.why)
        return plan.retake

    def _retake_failed(self, partition: int, token: object, reason: str) -> None:
        """An attempt to take ``partition`` back failed: count it and try again, later."""
        with self._lock:
            if self._closed or self._retaking.get(partition) is not token:
                return
            self._failures[partition] = failures = self._failures.get(partition, 0) + 1
            token = self._retaking[partition] = object()
        delay = retake_delay(failures)
        _log.warning(
            "member %s: could not take source partition %d back (%s); next attempt in %gs (attempt %d)",
            self.pod, partition, reason, delay, failures,
        )  # fmt: skip
        self._retake_later(partition, delay, token)

    def _await_idle(self, partitions: list[int], timeout: float) -> None:
        """Wait until no transaction is open on ``partitions`` (at most ``timeout``)."""

        def busy() -> list[int]:
            return [p for p in partitions if (s := self._slots.get(p)) is not None and s.open is not None]

        with self._lock:
            if not self._units_changed.wait_for(lambda: not busy(), timeout):
                _log.warning(
                    "member %s: transactions of %s still open after %.0fs; releasing anyway "
                    "(exactly-once: the next owner fences them)",
                    self.pod,
                    busy(),
                    timeout,
                )


class _Units:
    """A member's side of its units (``UnitOwner``): the one way a unit reaches its member."""

    def __init__(self, member: GroupProducer) -> None:
        self._member = member
        self.pod, self.namespace, self.group = member.pod, member.namespace, member.group

    def check(self, unit: SourceTransaction) -> None:
        member = self._member
        member._ensure_lease()
        with member._lock:
            slot = member._slots.get(unit.partition)
            if slot is None or slot.open is not unit:
                raise NotOwnedError(
                    f"source partition {unit.partition} was taken from member {self.pod} during the "
                    "transaction; nothing more of it can be written"
                )

    def ended(self, unit: SourceTransaction, committed: bool, failed: str | None = None) -> str:
        member = self._member
        outcome = member._unit_failed(unit, failed) if failed is not None else ""
        with member._lock:
            if committed:
                member._failures.pop(unit.partition, None)
            slot = member._slots.get(unit.partition)
            if slot is not None and slot.open is unit:
                slot.open = None
                if committed:
                    member._idle.touch(time.monotonic())
            # not the idle watch: a later deadline needs no wake-up (it looks again when the old
            # one passes)
            member._units_changed.notify_all()
        return outcome


def _exit_on_sigterm(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)
