"""The operator's Kafka side: one set of clients per Kafka cluster, shared by all resources."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, OffsetSpec

from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLog, EpochLogWriter, ensure_log_topics
from ordo.epochs.registry import ProducerRegistry, ProducerReport

from .config import OperatorConfig

__all__ = ["KafkaSide", "clients_for"]

_CLIENT_LOG = logging.getLogger("ordo_operator.librdkafka")


class KafkaSide:
    """Admin, epoch log (reader and writer) and producer registry for one Kafka cluster."""

    def __init__(self, config: Mapping[str, Any], settings: OperatorConfig) -> None:
        # librdkafka's own lines go through Python logging (the operator's JSON logs), not raw to
        # stderr; a client hands them over when polled, so the admin client and the writer,
        # which are not polled between calls, are served by a thread of their own
        self.config = {**config, "logger": _CLIENT_LOG}
        self.timeout = settings.kafka_timeout_seconds
        self.admin = AdminClient(self.config)
        ensure_log_topics(self.admin, settings.epoch_topic, settings.registry_topic)
        self.epochs = EpochLog(self.config, settings.epoch_topic)
        self.registry = ProducerRegistry(self.config, settings.registry_topic)
        self.writer = EpochLogWriter(self.config, settings.epoch_topic)
        self._stop = threading.Event()
        self._logs = threading.Thread(target=self._serve_logs, name="ordo-kafka-logs", daemon=True)
        self._logs.start()
        if not (self.epochs.catch_up(30) and self.registry.catch_up(30)):
            self.close()
            raise ConnectionError(
                f"cannot read ordo's log topics at {self.config.get('bootstrap.servers')}: "
                f"{self.epochs.describe()}; {self.registry.describe()}"
            )

    def partition_count(self, topic: str) -> int | None:
        """The broker's partition count, or None when the topic does not exist (no auto-create)."""
        metadata = self.admin.list_topics(timeout=self.timeout).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return None
        return len(metadata.partitions)

    def end_offsets(self, topic: str, partitions: int) -> dict[int, int]:
        """The log end of partitions 0..partitions-1 (read_uncommitted: the thresholds)."""
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        request = {TopicPartition(topic, p): latest for p in range(partitions)}
        futures = self.admin.list_offsets(
            request, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=self.timeout
        )
        wait = self.timeout + 5
        return {tp.partition: future.result(timeout=wait).offset for tp, future in futures.items()}

    def create_partitions(self, topic: str, count: int) -> str | None:
        """Raise the topic to ``count`` partitions and return once their leaders serve them. A
        call that failed or timed out although the topic has them (it took effect on the broker,
        or an earlier call did) is fine: returns what happened, for the record; None when the
        call simply succeeded."""
        note = None
        try:
            future = self.admin.create_partitions([NewPartitions(topic, count)], request_timeout=self.timeout)
            future[topic].result(self.timeout + 5)
        except KafkaException as error:
            if (self.partition_count(topic) or 0) < count:
                raise
            note = f"CreatePartitions failed ({error.args[0]}) but took effect: {topic} has {count}"
        self._await_served(topic, count)
        return note

    def _await_served(self, topic: str, count: int) -> None:
        """Wait until the leader of each of the ``count`` partitions answers ListOffsets for it.

        CreatePartitions answers, and the metadata lists the new partitions, before the broker
        hosts them: it opens their logs one by one and answers NOT_LEADER_FOR_PARTITION until
        then. An idempotent producer that writes to a partition in that window can be told its
        first batch was written when it was not (Kafka 4.3.1, librdkafka 2.16; see
        docs/reliability.md). So the new epoch is published only once every partition is served."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self.end_offsets(topic, count)  # every partition's leader answered
                return
            except KafkaException as error:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"partitions of {topic!r} are created but not all served by a leader "
                        f"after {self.timeout:g}s: {error}"
                    ) from error
            # the admin client finds leaders in its own metadata: refresh it, then ask again
            self.admin.list_topics(topic, timeout=self.timeout)
            time.sleep(0.05)

    def write_history(self, history: EpochHistory) -> None:
        """Write the topic's new history and wait until the log reads it back (a write that is not
        readable has not happened for the clients)."""
        self.writer.write(history, self.timeout)
        if not self.epochs.wait_for(lambda: self.epochs.history(history.topic) == history, self.timeout):
            raise TimeoutError(f"the epoch log does not read back {history.topic}'s new history yet")

    def live_producers(self, topic: str) -> Mapping[str, ProducerReport]:
        """The producers of ``topic`` live now, judged from every report written before this
        call: a reader that lags would count a live producer as gone, and a fence would then not
        wait for it (its records under the old partition count would land after the thresholds).
        A report's age is measured from when this operator read it, not from the producer's
        wall-clock stamp (clock skew between machines would decide otherwise)."""
        if not self.registry.catch_up(self.timeout):
            raise TimeoutError(f"the producer registry is not read to its end: {self.registry.describe()}")
        return self.registry.live(topic)  # by arrival here: a producer's own clock may be off

    def _serve_logs(self) -> None:
        while not self._stop.wait(1.0):
            self.admin.poll(0)
            self.writer.poll()

    def close(self) -> None:
        self._stop.set()
        self.epochs.close()
        self.registry.close()
        self.writer.close()


_clients: dict[str, KafkaSide] = {}
_lock = threading.Lock()


def clients_for(config: Mapping[str, Any], settings: OperatorConfig) -> KafkaSide:
    """The shared clients for this connection config (created on first use)."""
    key = repr(sorted(config.items()))
    with _lock:
        side = _clients.get(key)
        if side is None:
            side = _clients[key] = KafkaSide(config, settings)
        return side


def close_all() -> None:
    with _lock:
        for side in _clients.values():
            side.close()
        _clients.clear()
