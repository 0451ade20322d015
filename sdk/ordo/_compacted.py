"""A background reader of a compacted topic that keeps the latest valid value per key.

ordo's control topics (the epoch log, the producer registry) hold the whole truth in the last
record of each key, so a reader needs no state but this map. Records that fail validation are
counted and logged with their key, and never replace a good value.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ._clients import assign_known, consumer_side, drain, logged, relearn_leaders
from .control_topics import MAX_CONTROL_RECORD_BYTES

__all__ = ["CompactedTopicReader", "durable_settings", "ensure_compacted_topics"]

V = TypeVar("V")
_log = logging.getLogger(__name__)


def reader_config(kafka_config: Mapping[str, Any], purpose: str) -> dict[str, Any]:
    """A consumer config from any client config: producer-only properties dropped, librdkafka's
    lines to Python logging, no group commits, and every fetch answered as soon as a record is
    there (a ``fetch.min.bytes`` tuned for bulk data would hold each read of a control topic for
    ``fetch.wait.max.ms``: 1 s more to start a GatedConsumer, measured)."""
    config = logged(consumer_side(kafka_config))
    config.update(
        {
            "group.id": f"ordo-{purpose}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "fetch.min.bytes": 1,
        }
    )
    return config


class CompactedTopicReader(Generic[V]):
    """Tails partition 0 of ``topic`` from the beginning on a daemon thread."""

    def __init__(self, kafka_config: Mapping[str, Any], topic: str) -> None:
        self.topic = topic
        self.invalid_records = 0
        self.last_error: KafkaError | None = None  # the last error event of the reader's consumer
        self._values: dict[str, V] = {}
        self._heard: dict[str, float] = {}  # key -> this process's monotonic time its value arrived
        self._listeners: list[Callable[[V], None]] = []
        self._changed = threading.Condition()
        self._end: int | None = None  # the high watermark catch_up() last read, for describe()
        self._version = 0  # bumped on every accepted value
        # How far this reader has read: past its last record, or the end it reached (a record's
        # position excludes the transaction marker after it; the end includes it)
        self._position = -1
        self._config = dict(kafka_config)
        self._probe: Consumer | None = None  # for catch_up(), made on first use
        self._probe_lock = threading.Lock()
        self._consumer = Consumer(reader_config(kafka_config, f"reader-{topic}"))
        assign_known(self._consumer, [TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"ordo-tail-{topic}", daemon=True)
        self._thread.start()

    # -- to be provided by subclasses ---------------------------------------------------------

    def parse(self, key: str, value: bytes) -> V:
        """The value of a record; raise ValueError with the reason when it is invalid."""
        raise NotImplementedError

    def accept(self, key: str, previous: V | None, value: V) -> str | None:
        """A reason to refuse ``value`` given the ``previous`` one, or None to accept it."""
        return None

    def merge(self, key: str, previous: V | None, value: V) -> V:
        """What to hold once ``value`` is accepted (by default ``value`` itself)."""
        return value

    # -- reading -----------------------------------------------------------------------------

    def get(self, key: str) -> V | None:
        with self._changed:
            return self._values.get(key)

    def snapshot(self) -> dict[str, V]:
        with self._changed:
            return dict(self._values)

    def heard(self) -> dict[str, tuple[V, float]]:
        """Every value with the ``time.monotonic()`` of this reader when it read it: an age by
        this machine's clock alone, whatever clock the writer stamped into the value."""
        with self._changed:
            return {key: (value, self._heard[key]) for key, value in self._values.items()}

    def subscribe(self, listener: Callable[[V], None]) -> Callable[[], None]:
        """Call ``listener`` (on the reader thread) with every accepted value; returns an unsubscribe."""
        with self._changed:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._changed:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def describe(self) -> str:
        """Where the reader stands, for a message saying why it did not catch up."""
        with self._changed:
            position, end = self._position, self._end
        target = "end not read yet" if end is None else f"the end was {end}"
        return f"{self.topic}: position {position}, {target}, last error {self.last_error}"

    def catch_up(self, timeout: float) -> bool:
        """Wait until everything written to the topic before this call has been read; a
        transaction still open holds the reader back until it ends.

        The target is the high watermark, read when called. Waiting for the consumer's
        end-of-partition event instead is not enough: librdkafka signals it only for a fetch
        that finds nothing new, so a reader of a topic written several times a second (the
        registry, with producers reporting) may never hear it although it is at the end. And
        not the last stable offset a read_committed client is told: a transaction committed
        after one that is still open lies beyond it, and a new owner stopping there would start
        from an older checkpoint and copy a unit twice (the chaos soak found it)."""
        deadline = time.monotonic() + timeout
        high = self.end_offset(timeout)
        if high is None:
            return False
        # not read_up_to(): at an empty topic's end (0) this still waits for the reader to get there
        return self.wait_for(lambda: self._position >= high, max(0.0, deadline - time.monotonic()))

    def end_offset(self, timeout: float) -> int | None:
        """The topic's high watermark now, asked of its leader (None when it did not answer
        within ``timeout``): everything written before the call lies below it."""
        deadline = time.monotonic() + timeout
        with self._probe_lock:  # the reader's own consumer is busy polling on its thread
            if self._probe is None:
                config = reader_config(self._config, f"probe-{self.topic}")
                self._probe = Consumer({**config, "isolation.level": "read_uncommitted"})
            partition = TopicPartition(self.topic, 0)
            while True:  # a topic just created, a broker restarting: ask again until the deadline
                left = deadline - time.monotonic()
                try:
                    ask = max(left, 0.1)
                    _, high = self._probe.get_watermark_offsets(partition, timeout=ask, cached=False)
                    break
                except KafkaException as error:
                    self.last_error = error.args[0]
                    # its leader may have moved: the probe, never assigned, would not hear of it
                    relearn_leaders(self._probe, self.topic, max(0.1, min(1.0, deadline - time.monotonic())))
                    if left <= 0.2:
                        return None
                    self._stop.wait(0.2)
                finally:
                    drain(self._probe)  # its log lines: the probe is never polled otherwise
        with self._changed:
            self._end = high
        return int(high)

    def read_up_to(self, offset: int, timeout: float) -> bool:
        """Wait until every record below ``offset`` has been read and applied (accepted or
        refused), e.g. an end offset the caller read itself; False after ``timeout``. A topic's
        last record is never compacted away, so the reader reaches any end it was given."""
        return offset <= 0 or self.wait_for(lambda: self._position >= offset, timeout)

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    @property
    def version(self) -> int:
        """Grows with every accepted value: equal versions, the same values."""
        with self._changed:
            return self._version

    def wait_for_change(self, timeout: float) -> bool:
        """Wait until a new value is accepted (or ``timeout``); True if one was."""
        with self._changed:
            seen = self._version
            return self._changed.wait_for(lambda: self._version != seen, timeout)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._consumer.close()
        with self._probe_lock:
            if self._probe is not None:
                drain(self._probe)
                self._probe.close()

    def _run(self) -> None:
        partition = [TopicPartition(self.topic, 0)]
        while not self._stop.is_set():
            message = self._consumer.poll(0.1)
            if message is not None:
                error = message.error()
                if error is None:
                    self._apply(message.key(), message.value())
                elif error.code() == KafkaError._PARTITION_EOF:
                    with self._changed:  # past a trailing transaction marker too
                        self._position = max(self._position, message.offset() or 0)
                        self._changed.notify_all()
                else:
                    self.last_error = error
                    if error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                        _log.warning("%s: %s", self.topic, error)
            # Only now, with the record applied: catch_up() must never see a position whose
            # record a reader cannot get yet (a new owner would start from an older checkpoint).
            position = self._consumer.position(partition)[0].offset
            if position > self._position:
                with self._changed:
                    self._position = position
                    self._changed.notify_all()

    def _refuse(self, key: bytes | str | None, reason: str) -> None:
        self.invalid_records += 1
        _log.error("%s: ignoring record with key %r: %s", self.topic, key, reason)

    def _apply(self, raw_key: bytes | None, raw_value: bytes | None) -> None:
        if raw_key is None:
            self._refuse(raw_key, "no key")
            return
        key = raw_key.decode(errors="replace")
        if raw_value is None:  # a tombstone: the key is gone
            with self._changed:
                self._values.pop(key, None)
                self._heard.pop(key, None)
                self._changed.notify_all()
            return
        try:
            value = self.parse(key, raw_value)
        except ValueError as error:
            self._refuse(raw_key, str(error))
            return
        with self._changed:
            previous = self._values.get(key)
            reason = self.accept(key, previous, value)
            if reason is not None:
                self._refuse(raw_key, reason)
                return
            value = self.merge(key, previous, value)
            self._values[key] = value
            self._heard[key] = time.monotonic()
            self._version += 1
            listeners = list(self._listeners)
            self._changed.notify_all()
        for listener in listeners:
            listener(value)


def durable_settings(brokers: int) -> tuple[int, int]:
    """The replication factor and min.insync.replicas ordo gives a control topic it creates on a
    cluster of ``brokers``: min(3, brokers) replicas, and min(2, that) in sync for an acks=all
    write, so one broker's death loses nothing acknowledged and writes go on (docs/reliability.md,
    "What the cluster needs")."""
    replication = max(1, min(3, brokers))
    return replication, min(2, replication)


def ensure_compacted_topics(admin: AdminClient, names: list[str], replication: int | None = None) -> None:
    """Create these control topics (compacted, one partition: readers tail partition 0, records
    up to MAX_CONTROL_RECORD_BYTES) if missing, replicated as ``durable_settings`` says for the
    cluster's brokers unless ``replication`` is given (-1: the cluster's default factor and min
    ISR). An existing topic is left as it is."""
    metadata = admin.list_topics(timeout=10)
    existing = metadata.topics
    settings = {
        "cleanup.policy": "compact",
        "min.compaction.lag.ms": "60000",
        "max.message.bytes": str(MAX_CONTROL_RECORD_BYTES),
    }
    if replication is None:
        replication, min_insync = durable_settings(len(metadata.brokers))
        settings["min.insync.replicas"] = str(min_insync)
    wanted = [
        NewTopic(name, num_partitions=1, replication_factor=replication, config=settings)
        for name in dict.fromkeys(names)
        if name not in existing
    ]
    if not wanted:
        return
    for name, future in admin.create_topics(wanted).items():
        try:
            future.result(timeout=30)
        except Exception as error:  # a concurrent creator is fine
            if "TOPIC_ALREADY_EXISTS" not in str(error):
                raise RuntimeError(f"cannot create {name}: {error}") from error
