"""The epoch log client: tails ``__ordo_epochs`` and keeps each topic's latest history.

The log is a compacted single-partition topic, key = topic, value = the topic's whole history,
so the last record per key is the truth and a reader needs no other state. The operator is its
only writer (``EpochLogWriter``); producers, consumers and Spark read it (``EpochLog``), with
read_committed.

One writer at a time: the operator's writer is transactional, with one transactional id per
epoch log (``writer_transactional_id``), so the ``init_transactions`` of a newly active replica
fences every older writer (a paused ex-active replica's next commit fails) and aborts what it had
open. Each write is checked against the log as read after that fence (``write_checked``): a
history that does not follow the one the log holds is refused, never written. And since
compaction keeps only a key's last record, a record readers refuse (a late write of an older
writer, of a tool) must not stay last: the writer reads the log back after writing and writes the
newest history again when a refused record follows it (``EpochLog.stale_tails``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from .._clients import logged
from .._compacted import CompactedTopicReader, ensure_compacted_topics
from ..control_topics import DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC, MAX_CONTROL_RECORD_BYTES
from ..errors import ConfigError
from .history import EpochError, EpochHistory

__all__ = [
    "EpochLog",
    "EpochLogWriter",
    "StaleHistoryError",
    "ensure_log_topics",
    "read_history",
    "refuse_unread",
    "writer_transactional_id",
]

_log = logging.getLogger(__name__)
_REWRITES = 3  # a refused record after ours: write ours again at most this often per write
STARTUP_READ_SECONDS = 60.0
"""How long a client starting waits to have read the epoch log to its end: a first fetch on a
loaded node can take tens of seconds, and a client that starts on a partial history could place or
deliver a moved key's records out of order."""
_MISSING = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION)
MISSING_TOPIC_SECONDS = 10.0
"""How long an epoch log Kafka says does not exist is waited for (just created, its metadata still
spreading) before the client refuses at once: a wrong name or no operator yet."""


class StaleHistoryError(EpochError):
    """A history that does not follow the one the epoch log holds now (it was planned on an older
    view of the log, e.g. by a replica that was paused): not written. Read the log and plan again."""


def writer_transactional_id(epoch_topic: str = DEFAULT_EPOCH_TOPIC) -> str:
    """The operator's epoch log writer's transactional id: one per epoch log, so whichever writer
    initialised last is the only one whose writes commit."""
    return f"ordo-epoch-log.{epoch_topic}"


class EpochLog(CompactedTopicReader[EpochHistory]):
    """A background reader of the epoch log. Thread-safe; call ``close()`` when done."""

    def __init__(self, kafka_config: Mapping[str, Any], topic: str = DEFAULT_EPOCH_TOPIC) -> None:
        self._tails_lock = threading.Lock()
        self._stale: dict[str, str] = {}  # topic -> why its last record read is refused
        super().__init__(kafka_config, topic)

    def parse(self, key: str, value: bytes) -> EpochHistory:
        try:
            history = EpochHistory.model_validate_json(value)
            if history.topic != key:
                raise ValueError(f"the key names another topic than {history.topic!r}")
        except ValueError as error:
            self._tail(key, str(error))
            raise
        return history

    def accept(self, key: str, previous: EpochHistory | None, value: EpochHistory) -> str | None:
        reason = None if previous is None else value.why_not_after(previous)
        self._tail(key, reason)
        return reason

    def _tail(self, key: str, refused: str | None) -> None:
        with self._tails_lock:
            if refused is None:
                self._stale.pop(key, None)
            else:
                self._stale[key] = refused

    def stale_tails(self) -> dict[str, str]:
        """Topics whose last record read is one readers refuse (a late or stray write after the
        newest history), with the reason. Compaction keeps only a key's last record: a reader
        that starts after it would find that record alone and take it. The writer writes the
        newest history again (``EpochLogWriter.write_checked``)."""
        with self._tails_lock:
            return dict(self._stale)

    def history(self, topic: str) -> EpochHistory | None:
        return self.get(topic)

    def histories(self) -> dict[str, EpochHistory]:
        return self.snapshot()


def refuse_unread(log: EpochLog, bootstrap: str, timeout: float = STARTUP_READ_SECONDS) -> None:
    """Return once ``log`` has read the epoch log to its end; otherwise ConfigError saying why
    (after ``timeout``, or ``MISSING_TOPIC_SECONDS`` when Kafka says the topic does not exist).
    The caller closes what it built."""
    started = time.monotonic()
    while True:
        left = timeout - (time.monotonic() - started)
        if log.catch_up(max(0.0, min(left, 2.0))):
            return
        error = log.last_error
        missing = isinstance(error, KafkaError) and error.code() in _MISSING
        waited = time.monotonic() - started
        if left <= 0 or (missing and waited >= MISSING_TOPIC_SECONDS):
            raise ConfigError(
                f"cannot read the epoch log {log.topic!r} at {bootstrap} after {waited:.0f}s "
                f"({log.describe()}): the ordo operator creates it when it starts with this Kafka as "
                "its default (ORDO_KAFKA_BOOTSTRAP, the chart's kafka.bootstrapServers); check that it "
                "runs, and that the epoch topic named matches its own"
            )


def read_history(
    kafka_config: Mapping[str, Any], epoch_topic: str, topic: str, timeout: float = 10.0
) -> EpochHistory:
    """One topic's history as the log has it now (a one-off read); raises when the log cannot be
    read within ``timeout`` or has no history of ``topic``."""
    log = EpochLog(kafka_config, epoch_topic)
    try:
        if not log.catch_up(timeout):
            raise TimeoutError(f"the epoch log {epoch_topic!r} was not read to its end in {timeout:g}s")
        history = log.history(topic)
    finally:
        log.close()
    if history is None:
        raise LookupError(f"the epoch log {epoch_topic!r} has no history of {topic!r}")
    return history


class EpochLogWriter:
    """The operator's writer: one synchronous write per history change. A write serves the
    producer's log lines; between writes, ``poll()`` does.

    Without ``transactional_id``: idempotent (tests, benchmarks, tools that own a log). With it
    (the operator, ``writer_transactional_id``): each write is a transaction, and the
    ``init_transactions`` of the writer that started last fences every other writer with that id:
    their writes fail (``KafkaException``, fatal) and nothing of them reaches a read_committed
    reader. A fenced writer starts a new producer (fencing the other in turn) at its next write."""

    def __init__(
        self,
        kafka_config: Mapping[str, Any],
        topic: str = DEFAULT_EPOCH_TOPIC,
        transactional_id: str | None = None,
    ) -> None:
        self.topic = topic
        self.transactional_id = transactional_id
        # JSON of offsets compresses several times over: a long history stays far below the
        # topic's record limit (and below 1 MB on a log topic created with Kafka's default)
        # linger 0: each write is one record waited for (a fence's publish waits on it)
        config = {
            **kafka_config,
            "linger.ms": 0,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": "zstd",
            "message.max.bytes": MAX_CONTROL_RECORD_BYTES,
        }
        if transactional_id is not None:
            # its fatal errors (fenced) are told here, not raised out of a poll or a flush
            config = {"error_cb": self._failed, **config, "transactional.id": transactional_id}
        self._config = logged(config)
        self.last_fatal: KafkaError | None = None
        self._producer = Producer(self._config)
        self._initialised = transactional_id is None
        self._own_end: int | None = None  # the log's end after this writer's last commit (its marker)
        self.fenced_writers = 0  # times init_transactions ran: the first, then after each failure

    def ready(self, timeout: float) -> bool:
        """Initialise the transactional producer if it is not (fencing every other writer with its
        id and ending what they left open); True when it did just now, so the caller's view of
        the log may predate the fence and must be read again."""
        if self._initialised:
            return False
        try:
            self._producer.init_transactions(timeout)
        except KafkaException as error:
            self._renew()
            if error.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                raise PermissionError(
                    f"epoch log {self.topic}: the writer may not use its transactional id "
                    f"{self.transactional_id!r}: grant this principal WRITE and DESCRIBE on that "
                    "TransactionalId (docs/security.md)"
                ) from error
            raise
        self._initialised = True
        self.fenced_writers += 1
        return True

    def write(self, history: EpochHistory, timeout: float = 30.0) -> None:
        """Write ``history``; raises when it was not acknowledged (committed) within ``timeout``.
        After a failure the next write uses a new producer (a failed idempotent producer may
        refuse every later record, a fenced transactional one does); a late copy of the failed
        write cannot undo a newer one, since readers refuse a history that goes backwards, and
        a fenced one never commits."""
        try:
            if self.transactional_id is None:
                self._write(history, timeout)
            else:
                self.ready(timeout)
                self._commit(history, timeout)
        except (RuntimeError, KafkaException):
            self._renew()
            raise

    def write_checked(self, history: EpochHistory, log: EpochLog, timeout: float = 30.0) -> bool:
        """Write ``history`` unless ``log`` holds it already (whether it wrote), and return once
        ``log`` reads it back as the topic's last record. Raises ``StaleHistoryError`` (nothing
        written) when it does not follow what the log holds, read after this writer fenced
        every other: so a writer that was paused, or planned on an older view, never writes
        over a newer history. A refused record read after ours (a stray or late write) is
        answered by writing ours again: compaction would leave that record alone for the next
        reader. ``log`` must read this writer's epoch log."""
        deadline = time.monotonic() + timeout
        topic = history.topic
        self.ready(timeout)
        wrote = False
        for _ in range(_REWRITES + 1):
            self._read_to_end(log, deadline)
            current = log.history(topic)
            if current is not None and current != history:
                reason = history.why_not_after(current)
                if reason is not None:
                    raise StaleHistoryError(
                        f"epoch log {self.topic}: {topic}'s history was not written: {reason} as the log "
                        f"holds it now (epoch {current.current.epoch} {current.current.state}); planned on "
                        "an older view of the log"
                    )
            elif current == history and topic not in log.stale_tails():
                return wrote
            elif current == history:
                _log.warning(
                    "epoch log %s: a refused record follows %s's newest history (%s): writing it again, "
                    "so that compaction keeps the newest",
                    self.topic, topic, log.stale_tails().get(topic),
                )  # fmt: skip
            self.write(history, max(0.1, deadline - time.monotonic()))
            wrote = True
            if not log.wait_for(lambda: log.history(topic) == history, max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"the epoch log does not read back {topic}'s new history yet")
        raise RuntimeError(f"epoch log {self.topic}: refused records keep following {topic}'s newest history")

    def _read_to_end(self, log: EpochLog, deadline: float) -> None:
        """``log.catch_up``, except that when the log ends with this writer's own last commit
        the reader is through once it read that record: a reader passes a trailing commit
        marker only at its next empty poll (100 ms), which every write would otherwise wait."""
        high = log.end_offset(max(0.0, deadline - time.monotonic()))
        if high is not None and high == self._own_end:
            high -= 1  # the marker after our record: nothing was written since
        if high is None or not log.read_up_to(high, max(0.0, deadline - time.monotonic())):
            raise TimeoutError(f"the epoch log is not read to its end: {log.describe()}")

    def _renew(self) -> None:
        self._producer.purge()
        self._producer = Producer(self._config)
        self._initialised = self.transactional_id is None

    def _failed(self, error: KafkaError) -> None:
        if error.fatal():
            self.last_fatal = error

    def _commit(self, history: EpochHistory, timeout: float) -> None:
        """One transaction of one record: committed (which waits for its delivery), or raises."""
        written: list[int] = []

        def delivered(error: KafkaError | None, message: Any) -> None:
            if error is None:
                written.append(message.offset())

        self._own_end = None
        self._producer.begin_transaction()
        try:
            self._producer.produce(
                self.topic, key=history.topic.encode(), value=history.model_dump_json().encode(),
                on_delivery=delivered,
            )  # fmt: skip
            self._producer.commit_transaction(timeout)
            self._own_end = written[-1] + 2 if written else None  # the record, then its commit marker
        except KafkaException as error:
            if not error.args[0].fatal():  # not committed: aborted, so no read_committed reader sees it
                with contextlib.suppress(KafkaException):  # else the next init_transactions aborts it
                    self._producer.abort_transaction(timeout)
            raise

    def _write(self, history: EpochHistory, timeout: float) -> None:
        errors: list[KafkaError] = []

        def delivered(error: KafkaError | None, _message: object) -> None:
            if error is not None:
                errors.append(error)

        self._producer.produce(
            self.topic,
            key=history.topic.encode(),
            value=history.model_dump_json().encode(),
            on_delivery=delivered,
        )
        left = self._producer.flush(timeout)
        if left or errors:
            raise RuntimeError(
                f"epoch log {self.topic}: write for {history.topic!r} failed: "
                f"{errors[0] if errors else 'timed out'}"
            )

    def poll(self) -> None:
        """Serve the producer's callbacks and log lines (a client with a ``logger`` hands its
        lines over only when polled)."""
        with contextlib.suppress(KafkaException):  # a fenced producer's error: its next write tells it
            self._producer.poll(0)

    def close(self) -> None:
        self._producer.flush(10)


def ensure_log_topics(
    admin: AdminClient,
    epoch_topic: str = DEFAULT_EPOCH_TOPIC,
    registry_topic: str = DEFAULT_REGISTRY_TOPIC,
    replication: int | None = None,
) -> None:
    """Create the epoch log and the producer registry (compacted, 1 partition each) if missing:
    by default replicated to min(3, brokers) with min.insync.replicas min(2, that)
    (``ordo._compacted.durable_settings``); -1 takes the cluster's defaults."""
    ensure_compacted_topics(admin, [epoch_topic, registry_topic], replication)
