"""The epoch log client: tails ``__ordo_epochs`` and keeps each topic's latest history.

The log is a compacted single-partition topic, key = topic, value = the topic's whole history,
so the last record per key is the truth and a reader needs no other state. The operator is its
only writer (``EpochLogWriter``); producers, consumers and Spark read it (``EpochLog``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .history import EpochHistory

__all__ = ["DEFAULT_EPOCH_TOPIC", "DEFAULT_REGISTRY_TOPIC", "EpochLog", "EpochLogWriter", "ensure_log_topics"]

DEFAULT_EPOCH_TOPIC = "__ordo_epochs"
DEFAULT_REGISTRY_TOPIC = "__ordo_producers"
_log = logging.getLogger(__name__)

Listener = Callable[[EpochHistory], None]


class EpochLog:
    """A background reader of the epoch log. Thread-safe; call ``close()`` when done."""

    def __init__(self, kafka_config: Mapping[str, Any], topic: str = DEFAULT_EPOCH_TOPIC) -> None:
        self.topic = topic
        self._histories: dict[str, EpochHistory] = {}
        self._listeners: list[Listener] = []
        self._changed = threading.Condition()
        self._caught_up = False
        self.invalid_records = 0
        config = {k: v for k, v in kafka_config.items() if not k.startswith(("transactional.", "acks"))}
        config.update(
            {
                "group.id": f"ordo-epoch-reader-{id(self)}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
            }
        )
        self._consumer = Consumer(config)
        self._consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"ordo-epoch-log-{topic}", daemon=True)
        self._thread.start()

    def history(self, topic: str) -> EpochHistory | None:
        with self._changed:
            return self._histories.get(topic)

    def histories(self) -> dict[str, EpochHistory]:
        with self._changed:
            return dict(self._histories)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` (on the reader thread) with every new history; returns an unsubscribe."""
        with self._changed:
            self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def wait_caught_up(self, timeout: float) -> bool:
        """Wait until everything in the log when we started has been read."""
        return self.wait_for(lambda: self._caught_up, timeout)

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._consumer.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.1)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    self._mark_caught_up()
                elif error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    _log.warning("epoch log %s: %s", self.topic, error)
                continue
            self._apply(message.key(), message.value())

    def _mark_caught_up(self) -> None:
        with self._changed:
            self._caught_up = True
            self._changed.notify_all()

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None or value is None:
            return  # tombstones never happen (the log only grows); ignore rather than forget
        try:
            history = EpochHistory.model_validate_json(value)
        except ValueError as error:
            self.invalid_records += 1
            _log.error("epoch log %s: ignoring invalid record for key %r: %s", self.topic, key, error)
            return
        if history.topic != key.decode(errors="replace"):
            self.invalid_records += 1
            _log.error(
                "epoch log %s: ignoring record: key %r names another topic than %r",
                self.topic,
                key,
                history.topic,
            )
            return
        with self._changed:
            previous = self._histories.get(history.topic)
            if previous is not None and len(history.epochs) < len(previous.epochs):
                self.invalid_records += 1
                _log.error(
                    "epoch log %s: ignoring record for %r that drops epochs", self.topic, history.topic
                )
                return
            self._histories[history.topic] = history
            listeners = list(self._listeners)
            self._changed.notify_all()
        for listener in listeners:
            listener(history)


class EpochLogWriter:
    """The operator's writer: one synchronous, idempotent write per history change."""

    def __init__(self, kafka_config: Mapping[str, Any], topic: str = DEFAULT_EPOCH_TOPIC) -> None:
        self.topic = topic
        self._producer = Producer({**kafka_config, "enable.idempotence": True, "acks": "all"})

    def write(self, history: EpochHistory, timeout: float = 30.0) -> None:
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

    def close(self) -> None:
        self._producer.flush(10)


def ensure_log_topics(
    admin: AdminClient,
    epoch_topic: str = DEFAULT_EPOCH_TOPIC,
    registry_topic: str = DEFAULT_REGISTRY_TOPIC,
    replication: int = -1,
) -> None:
    """Create the epoch log (1 partition) and the producer registry, both compacted, if missing."""
    existing = admin.list_topics(timeout=10).topics
    wanted = [
        NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=replication,
            config={"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"},
        )
        for name, partitions in ((epoch_topic, 1), (registry_topic, 1))
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
