"""GroupProducer: one member of a ProducerGroup (KIP-509).

The operator assigns source partitions to member pods; this class follows the assignment, tells
the application what it got (with each partition's last checkpoint) and what it lost, and writes
each source partition's data with its checkpoint. A revoked partition accepts no new transaction;
once its open transaction ended (or the session's time is up) its producer is closed and the
generation acknowledged, and only then does the operator hand the partition to another member.
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

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kubernetes.client import ApiClient

from .._clients import drain, logged
from ..epochs.log import DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC, EpochLog
from ..errors import ConfigError, NotOwnedError, ProducerClosedError, TransactionScopeError
from ..ordered_producer import OrderedProducer
from ..protocol import GroupSettings, MemberAssignment, transactional_id
from .checkpoints import DEFAULT_CHECKPOINT_TOPIC, CheckpointLog, ensure_checkpoint_topic
from .membership import Membership
from .transaction import SourceTransaction

__all__ = ["GroupProducer", "Rebalance"]

_log = logging.getLogger(__name__)
DEFAULT_SETTINGS = GroupSettings(
    session_timeout_seconds=30, exactly_once=True, checkpoint_topic=DEFAULT_CHECKPOINT_TOPIC
)
Listener = Callable[["Rebalance"], None]


@dataclass(frozen=True)
class Rebalance:
    """What changed for this member in one assignment generation."""

    generation: int
    assigned: dict[int, str | None] = field(default_factory=dict)
    """Newly assigned source partitions → their last committed checkpoint (None: start afresh)."""
    revoked: list[int] = field(default_factory=list)
    """Source partitions handed back; they accept no new transaction."""
    lost: list[int] = field(default_factory=list)
    """Source partitions taken away without a handoff: fenced by a new owner, or the session lost."""


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
    ) -> None:
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
        if not self._epoch_log.catch_up(10):
            self._epoch_log.close()
            raise ConfigError(
                f"cannot read the epoch log {epoch_topic!r}: the ordo operator creates it; "
                "is it running against this Kafka?"
            )
        self._lock = threading.Condition()
        self._slots: dict[int, _Slot] = {}
        self._generation = -1
        self._settings: GroupSettings | None = None
        self._checkpoints: CheckpointLog | None = None
        self._shared: OrderedProducer | None = None  # at-least-once: one idempotent producer
        self._events: queue.Queue[Rebalance] = queue.Queue()
        self._closed = False
        self._membership = Membership(
            api_client, namespace, pod, group, on_assignment=self._on_assignment, on_lost=self._on_lost
        )

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
            api_client=_kubernetes_client(),
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
        """KIP-509's heartbeat call: heartbeats are automatic (the Lease); this says whether the
        member still holds its session."""
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
                self,
                source_partition,
                self._generation,
                slot.producer,
                settings.exactly_once,
                settings.checkpoint_topic,
            )
            slot.open = tx
        if settings.exactly_once:
            try:
                slot.producer.begin_transaction()
            except KafkaException as error:
                raise tx._failure(error) from error
        return tx

    def close(self, timeout: float = 30.0) -> None:
        """Stop producing, acknowledge, release the Lease (the partitions move at once)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for slot in self._slots.values():
                slot.revoking = True
        self._await_idle(list(self._slots), timeout)
        with self._lock:
            slots, self._slots = dict(self._slots), {}
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
        if self._closed:
            return
        target = set(assignment.partitions) if assignment is not None else set()
        settings = (assignment.settings if assignment else None) or self._settings or DEFAULT_SETTINGS
        self._adopt(settings)
        with self._lock:
            revoked = sorted(p for p in self._slots if p not in target)
            for p in revoked:
                self._slots[p].revoking = True
        self._await_idle(revoked, settings.session_timeout_seconds)
        with self._lock:
            gone = [self._slots.pop(p) for p in revoked if p in self._slots]
        self._close_producers(gone, 10)
        with self._lock:
            assigned = sorted(p for p in target if p not in self._slots)
        producers = self._open_producers(assigned, settings)
        log = self._checkpoints
        assert log is not None
        # The new owner's transactional producers are initialised (any transaction left open by
        # the previous owner is aborted), so the checkpoint topic can be read to its end now.
        while assigned and not log.catch_up(settings.session_timeout_seconds):
            if self._closed:
                return
            _log.warning("member %s: checkpoint topic not read to its end yet; waiting", self.pod)
        with self._lock:
            for p, producer in producers.items():
                self._slots[p] = _Slot(producer)
            if assignment is not None:
                self._generation = assignment.generation
        event = Rebalance(
            generation=assignment.generation if assignment else self._generation,
            assigned={p: self.checkpoint(p) for p in assigned},
            revoked=revoked,
        )
        self._deliver(event)
        if assignment is not None:
            self._membership.ack(assignment.generation)

    def _adopt(self, settings: GroupSettings) -> None:
        """Take the group's settings (from the first assignment); later changes need a restart."""
        if self._settings is not None:
            if settings != self._settings:
                _log.warning(
                    "member %s: the group's settings changed (%s); restart the member to apply them",
                    self.pod,
                    settings,
                )
            return
        self._settings = settings
        try:
            ensure_checkpoint_topic(self._admin, settings.checkpoint_topic)
        finally:
            drain(self._admin)
        self._checkpoints = CheckpointLog(self._kafka, settings.checkpoint_topic)
        if not settings.exactly_once:
            self._shared = self._ordered_producer(
                {**self._kafka, "enable.idempotence": True}, f"{self.namespace}/{self.pod}"
            )

    def _open_producers(self, partitions: list[int], settings: GroupSettings) -> dict[int, OrderedProducer]:
        if not settings.exactly_once:
            assert self._shared is not None
            return dict.fromkeys(partitions, self._shared)

        def open_one(p: int) -> OrderedProducer:
            config = {**self._kafka, "transactional.id": transactional_id(self.namespace, self.group, p)}
            producer = self._ordered_producer(config, f"{self.namespace}/{self.pod}/{p}")
            try:
                producer.init_transactions(settings.session_timeout_seconds + 30)  # fences the old owner
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

    def _close_producers(self, slots: Iterable[_Slot], timeout: float) -> None:
        for slot in slots:
            if slot.producer is not self._shared:
                slot.producer.close(timeout)

    def _on_lost(self) -> None:
        """The Lease expired under us: the operator may already have moved everything."""
        with self._lock:
            lost, slots = sorted(self._slots), list(self._slots.values())
            self._slots = {}
        self._close_producers(slots, 5)
        if lost:
            self._deliver(Rebalance(self._generation, lost=lost))

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
        if slot is None or slot.revoking:
            raise NotOwnedError(
                f"source partition {partition} is not assigned to member {self.pod} "
                f"(it owns {sorted(p for p, s in self._slots.items() if not s.revoking)})"
            )
        return slot

    def _check_still_owned(self, partition: int, tx: SourceTransaction) -> None:
        with self._lock:
            slot = self._slots.get(partition)
            if slot is None or slot.open is not tx:
                raise NotOwnedError(
                    f"source partition {partition} was taken from member {self.pod} during the "
                    "transaction; nothing more of it can be written"
                )

    def _transaction_ended(self, partition: int, tx: SourceTransaction) -> None:
        with self._lock:
            slot = self._slots.get(partition)
            if slot is not None and slot.open is tx:
                slot.open = None
            self._lock.notify_all()

    def _drop(self, partition: int, reason: str) -> None:
        """A fenced producer: the partition is gone from this member at once."""
        with self._lock:
            slot = self._slots.pop(partition, None)
            self._lock.notify_all()
        if slot is None:
            return
        _log.warning("member %s: source partition %d dropped: %s", self.pod, partition, reason)
        threading.Thread(target=slot.producer.close, args=(2.0,), daemon=True).start()
        self._deliver(Rebalance(self._generation, lost=[partition]))

    def _await_idle(self, partitions: list[int], timeout: float) -> None:
        """Wait until no transaction is open on ``partitions`` (at most ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                busy = [p for p in partitions if (s := self._slots.get(p)) is not None and s.open is not None]
                left = deadline - time.monotonic()
                if not busy or left <= 0:
                    if busy:
                        _log.warning(
                            "member %s: transactions of %s still open after %.0fs; releasing anyway "
                            "(exactly-once: the next owner fences them)",
                            self.pod,
                            busy,
                            timeout,
                        )
                    return
                self._lock.wait(left)


def _kubernetes_client() -> ApiClient:
    import kubernetes

    try:
        kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
    except kubernetes.config.ConfigException:
        try:
            kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
        except (kubernetes.config.ConfigException, FileNotFoundError) as error:
            raise ConfigError(
                f"no Kubernetes credentials: not in a cluster and no usable kubeconfig ({error})"
            ) from None
    return ApiClient()


def _exit_on_sigterm(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)
