"""One source partition's unit of work: produce its records, then commit them with a checkpoint.

Exactly-once: a Kafka transaction on the partition's own transactional producer holds the data
and the checkpoint record, so both land or neither does. At-least-once: the data is produced on
the member's idempotent producer and the checkpoint is written once every record of the unit is
acknowledged; a crash in between repeats the unit from the previous checkpoint.
"""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from confluent_kafka import KafkaError, KafkaException

from ..errors import CheckpointError, DeliveryError, NotOwnedError, ProducerFencedError, TransactionScopeError
from ..member_wire import checkpoint_key
from .checkpoints import Checkpoint
from .lapse import LeaseClock

if TYPE_CHECKING:
    from ..ordered_producer import OrderedProducer

__all__ = [
    "UNIT_HEADROOM_SECONDS",
    "SourceTransaction",
    "UnitOwner",
    "is_fenced",
    "unit_transaction_timeout_ms",
]


class UnitOwner(Protocol):
    """The member's side of its units (``GroupProducer`` gives each unit one): who the member is,
    and the two things a unit tells it. The member tells a unit two: ``begin`` and ``withdraw``."""

    pod: str
    namespace: str
    group: str

    def check(self, unit: SourceTransaction) -> None:
        """Raise NotOwnedError unless the member's Lease holds and ``unit`` is still the open unit
        of a partition it owns."""
        ...

    def ended(self, unit: SourceTransaction, committed: bool, failed: str | None = None) -> str:
        """``unit`` is over (committed or not); ``failed``: why its producer can no longer be used
        (fenced, or another fatal error), so the partition leaves the member at once. Returns
        what the member does about it (for the error the application gets)."""
        ...


_COMMIT_ATTEMPT = 5.0  # seconds one commit_transaction call may take before it is resumed
_FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
UNIT_HEADROOM_SECONDS = 30.0
"""Of a unit's transaction timeout, beyond a fence's wait and the delivery timeout: the unit's
own work and the commit's round trips."""


def is_fenced(error: KafkaError) -> bool:
    """The producer can no longer be used: its epoch was bumped (a newer owner's
    ``init_transactions``, the coordinator's timeout of its transaction, the operator's fence;
    Kafka reports all of them alike) or another fatal error."""
    return error.code() in _FENCED or error.fatal()


def unit_transaction_timeout_ms(
    config: Mapping[str, Any], block_timeout: float, delivery_timeout_ms: int
) -> int:
    """``transaction.timeout.ms`` of a unit's producer: the application's own, else long enough
    that the coordinator never aborts a unit in normal operation because ``produce()`` waited in
    a fence (up to ``block_timeout``) and its records then took up to the delivery timeout:
    both plus ``UNIT_HEADROOM_SECONDS`` (with the defaults 60 s + 30 s + 30 s = 120 s). The
    broker must allow it (``transaction.max.timeout.ms``, 15 min by default)."""
    given = config.get("transaction.timeout.ms")
    if given is not None:
        return int(given)
    return int((block_timeout + UNIT_HEADROOM_SECONDS) * 1000) + int(delivery_timeout_ms)


class SourceTransaction:
    """Made by :meth:`GroupProducer.transaction`; use it as a context manager."""

    def __init__(
        self,
        group: UnitOwner,
        partition: int,
        generation: int,
        producer: OrderedProducer,
        exactly_once: bool,
        checkpoint_topic: str,
        lease: LeaseClock,
    ) -> None:
        self.partition = partition
        self.generation = generation
        self._group = group
        self._producer = producer
        self._exactly_once = exactly_once
        self._checkpoint_topic = checkpoint_topic
        self._finished = False
        self._outstanding = 0  # at-least-once: records of this unit not yet acknowledged
        self._failed: list[KafkaError] = []
        self._acked = threading.Condition()
        self._withdrawn: str | None = None  # why the member took the partition away mid-unit
        self._lease = lease  # at-least-once: read before every record (nothing else fences it)
        if exactly_once:
            # While the unit is open, a plain keyed record goes from the caller to librdkafka in one
            # C call (a Python frame here cost 0.55 µs per record, measured); every other call, and
            # every call once the unit is over or withdrawn, runs produce() below.
            fast = producer._fast_path(types.MethodType(SourceTransaction.produce, self))
            if fast is not None:
                self.__dict__["produce"] = fast

    def __enter__(self) -> SourceTransaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if self._finished:
            return
        self.abort()
        if exc_type is None:
            raise TransactionScopeError(
                f"the transaction of source partition {self.partition} ended without commit(checkpoint) "
                "or abort(); it was aborted"
            )

    # -- producing ---------------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        headers: Any = None,
        on_delivery: Callable[[KafkaError | None, Any], None] | None = None,
    ) -> None:
        """Send a record as part of this unit (partitioned by the producer's partitioner)."""
        # the member marks a unit whose partition it takes away (_withdraw), so a record needs no
        # look at the member under its lock: that lock cost as much as the rest of the record
        if self._withdrawn is not None or self._finished:
            self._check_open()
        if self._exactly_once:
            try:
                if on_delivery is None and headers is None:
                    self._producer.produce(topic, value, key)  # positional: the C path takes it
                else:
                    self._producer.produce(topic, value, key, on_delivery=on_delivery, headers=headers)
            except KafkaException as error:
                raise self._failure(error) from error
            return
        if time.monotonic() > self._lease.valid_until:
            self._group.check(self)  # a member woken past its session: raises NotOwnedError
        callback = self._counting(on_delivery)
        with self._acked:
            self._outstanding += 1
        try:
            self._producer.produce(topic, value, key, on_delivery=callback, headers=headers)
        except KafkaException as error:
            with self._acked:
                self._outstanding -= 1
            raise self._failure(error) from error

    def commit(self, checkpoint: str, timeout: float = 30.0) -> None:
        """Write the data and ``checkpoint`` (where to restart from) together."""
        if not isinstance(checkpoint, str):
            raise CheckpointError(
                f"a checkpoint must be a str (e.g. an offset or timestamp as text), got "
                f"{type(checkpoint).__name__}: {checkpoint!r}; nothing was committed, the transaction is open"
            )
        self._check_open()
        record = Checkpoint.now(checkpoint, self._group.pod, self.generation).encode()
        key = checkpoint_key(self._group.namespace, self._group.group, self.partition)
        raw = self._producer.raw
        if self._exactly_once:
            try:
                raw.produce(self._checkpoint_topic, record, key, 0)
                self._commit_transaction(timeout)
            except KafkaException as error:
                raise self._failure(error) from error
            self._end(committed=True)
            return
        self._await_acks(timeout)
        if self._failed:
            self._end()
            raise DeliveryError(
                f"{len(self._failed)} record(s) of source partition {self.partition} were not delivered "
                f"(first: {self._failed[0]}); the checkpoint was not written: produce them again"
            )
        # again, last thing before the checkpoint is handed over: waiting for the acks may have
        # outlasted the Lease (a process stopped there wakes here)
        self._check_open()
        outcome: list[KafkaError | None] = []
        # after the data in the member's producer (in its own transaction, if it has one)
        self._producer.write_beside(
            self._checkpoint_topic, record, key, 0, on_delivery=lambda e, _m: outcome.append(e)
        )
        self._producer.flush(timeout)
        self._end(committed=bool(outcome) and outcome[0] is None)
        if not outcome or outcome[0] is not None:
            raise DeliveryError(
                f"the checkpoint of source partition {self.partition} was not written: "
                f"{outcome[0] if outcome else 'timed out'}"
            )

    def _commit_transaction(self, timeout: float) -> None:
        """Commit, retrying while librdkafka says the outcome is not known yet (a timed-out or
        retriable EndTxn): the commit may already have happened on the broker, so giving up and
        writing the unit again would duplicate it. Only a definite failure is raised."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                # bounded attempts: a commit whose EndTxn is slow is resumed by the next call
                self._producer.commit_transaction(min(_COMMIT_ATTEMPT, max(1.0, deadline - time.monotonic())))
                return
            except KafkaException as error:
                kafka_error: KafkaError = error.args[0]
                if not kafka_error.retriable() or time.monotonic() > deadline:
                    raise

    def abort(self) -> None:
        """Give the unit up. Exactly-once: nothing of it is visible to read_committed readers.
        At-least-once: records already sent stay; only the checkpoint is not written."""
        if self._finished:
            return
        if self._exactly_once:
            try:
                self._producer.abort_transaction()
            except KafkaException as error:
                if not is_fenced(error.args[0]):
                    raise
                # nothing of the unit is committed either way: the abort did what was asked
                self._end(failed=f"failed while aborting: {error.args[0]}")
                return
        self._end()

    # -- internals ---------------------------------------------------------------------------

    def begin(self) -> None:
        """Exactly-once: begin the unit's Kafka transaction (the member calls it once)."""
        if self._exactly_once:
            try:
                self._producer.begin_transaction()
            except KafkaException as error:
                raise self._failure(error) from error

    def withdraw(self, reason: str) -> None:
        """The member gave the partition up mid-unit (called under its lock, so it only marks):
        every later call of this unit raises NotOwnedError; the member aborts the unit itself.
        Every removal of a partition with an open unit calls this: produce() relies on it. A
        unit already over is left as it is."""
        if self._finished:
            return
        self._withdrawn = reason
        self._close_fast_path()

    def _close_fast_path(self) -> None:
        """From now on every produce() runs the method, which raises."""
        self.__dict__.pop("produce", None)

    def _check_open(self) -> None:
        if self._withdrawn is not None:
            raise NotOwnedError(
                f"source partition {self.partition} was taken from member {self._group.pod} during the "
                f"transaction ({self._withdrawn}); nothing of this unit is committed"
            )
        if self._finished:
            raise TransactionScopeError(
                f"the transaction of source partition {self.partition} is already committed or aborted"
            )
        self._group.check(self)

    def _end(self, committed: bool = False, failed: str | None = None) -> str:
        self._finished = True
        self._close_fast_path()
        return self._group.ended(self, committed, failed)

    def _failure(self, error: KafkaException) -> Exception:
        """Map a Kafka error: fenced or fatal → the partition leaves the member (which takes it
        back unless a newer owner has it); abortable → abort; else as it is."""
        kafka_error: KafkaError = error.args[0]
        if is_fenced(kafka_error):
            outcome = self._end(failed=str(kafka_error))
            return ProducerFencedError(
                f"source partition {self.partition}: its producer was fenced or failed ({kafka_error}); "
                f"nothing of this unit is committed; stop producing it: {outcome}"
            )
        if self._exactly_once and kafka_error.txn_requires_abort():
            self.abort()
            return TransactionScopeError(
                f"source partition {self.partition}: the transaction failed and was aborted ({kafka_error}); "
                "produce the unit again from the last checkpoint"
            )
        return error

    def _counting(
        self, user: Callable[[KafkaError | None, Any], None] | None
    ) -> Callable[[KafkaError | None, Any], None]:
        def delivered(error: KafkaError | None, message: Any) -> None:
            with self._acked:
                self._outstanding -= 1
                if error is not None:
                    self._failed.append(error)
                self._acked.notify_all()
            if user is not None:
                user(error, message)

        return delivered

    def _await_acks(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with self._acked:
                if self._outstanding <= 0:
                    return
            if time.monotonic() > deadline:
                with self._acked:
                    self._failed.append(KafkaError(KafkaError._MSG_TIMED_OUT))
                return
            self._producer.poll(0.05)  # serves delivery callbacks (ours or another thread's)
