"""The epoch log client: tails ``__ordo_epochs`` and keeps each topic's latest history.

The log is a compacted single-partition topic, key = topic, value = the topic's whole history,
so the last record per key is the truth and a reader needs no other state. The operator is its
only writer (``EpochLogWriter``); producers, consumers and Spark read it (``EpochLog``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from .._clients import logged
from .._compacted import CompactedTopicReader, ensure_compacted_topics
from ..control_topics import DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC, MAX_CONTROL_RECORD_BYTES
from .history import EpochHistory

__all__ = [
    "EpochLog",
    "EpochLogWriter",
    "ensure_log_topics",
    "read_history",
]


class EpochLog(CompactedTopicReader[EpochHistory]):
    """A background reader of the epoch log. Thread-safe; call ``close()`` when done."""

    def __init__(self, kafka_config: Mapping[str, Any], topic: str = DEFAULT_EPOCH_TOPIC) -> None:
        super().__init__(kafka_config, topic)

    def parse(self, key: str, value: bytes) -> EpochHistory:
        history = EpochHistory.model_validate_json(value)
        if history.topic != key:
            raise ValueError(f"the key names another topic than {history.topic!r}")
        return history

    def accept(self, key: str, previous: EpochHistory | None, value: EpochHistory) -> str | None:
        return None if previous is None else value.why_not_after(previous)

    def history(self, topic: str) -> EpochHistory | None:
        return self.get(topic)

    def histories(self) -> dict[str, EpochHistory]:
        return self.snapshot()


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
    """The operator's writer: one synchronous, idempotent write per history change. A write
    serves the producer's log lines; between writes, ``poll()`` does."""

    def __init__(self, kafka_config: Mapping[str, Any], topic: str = DEFAULT_EPOCH_TOPIC) -> None:
        self.topic = topic
        # JSON of offsets compresses several times over: a long history stays far below the
        # topic's record limit (and below 1 MB on a log topic created with Kafka's default)
        self._config = logged(
            {
                **kafka_config,
                "enable.idempotence": True,
                "acks": "all",
                "compression.type": "zstd",
                "message.max.bytes": MAX_CONTROL_RECORD_BYTES,
            }
        )
        self._producer = Producer(self._config)

    def write(self, history: EpochHistory, timeout: float = 30.0) -> None:
        """Write ``history``; raises when it was not acknowledged within ``timeout``. After a
        failure the next write uses a new producer (a failed idempotent producer may refuse every
        later record); a late copy of the failed write cannot undo a newer one, since readers
        refuse a history that goes backwards."""
        try:
            self._write(history, timeout)
        except RuntimeError:
            self._producer.purge()
            self._producer = Producer(self._config)
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
        self._producer.poll(0)

    def close(self) -> None:
        self._producer.flush(10)


def ensure_log_topics(
    admin: AdminClient,
    epoch_topic: str = DEFAULT_EPOCH_TOPIC,
    registry_topic: str = DEFAULT_REGISTRY_TOPIC,
    replication: int = -1,
) -> None:
    """Create the epoch log and the producer registry (compacted, 1 partition each) if missing."""
    ensure_compacted_topics(admin, [epoch_topic, registry_topic], replication)
