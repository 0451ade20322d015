"""The operator's Kafka side: one set of clients per Kafka cluster, shared by all resources."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from ordo.epochs import EpochHistory
from ordo.epochs.liveness import ProducerLiveness, ProducerReport
from ordo.epochs.log import (
    EpochLog,
    EpochLogWriter,
    StaleHistoryError,
    ensure_log_topics,
    writer_transactional_id,
)
from ordo.topics import await_served, end_offsets, relearn_leaders

from .config import OperatorConfig

__all__ = ["KafkaSide", "clients_for", "known_sides"]

_CLIENT_LOG = logging.getLogger("ordo_operator.librdkafka")
_log = logging.getLogger(__name__)


class KafkaSide:
    """Admin, epoch log (reader and writer) and producer registry for one Kafka cluster."""

    def __init__(self, config: Mapping[str, Any], settings: OperatorConfig) -> None:
        # librdkafka's own lines go through Python logging (the operator's JSON logs), not raw to
        # stderr; a client hands them over when polled, so the admin client and the writer,
        # which are not polled between calls, are served by a thread of their own
        self.config = {**config, "logger": _CLIENT_LOG}
        self.timeout = settings.kafka_timeout_seconds
        self.straggler_margin = settings.straggler_margin_seconds
        self.admin = AdminClient(self.config)
        ensure_log_topics(self.admin, settings.epoch_topic, settings.registry_topic)
        self.epochs = EpochLog(self.config, settings.epoch_topic)
        self.registry = ProducerLiveness(self.config, settings.registry_topic)
        # transactional: its init_transactions fences every older writer of this epoch log (an
        # ex-active replica that was paused), and write_checked refuses a history planned on a
        # view of the log older than that fence
        self.writer = EpochLogWriter(
            self.config, settings.epoch_topic, writer_transactional_id(settings.epoch_topic)
        )
        self._writing = threading.Lock()  # the log has one writer: an expansion, or the topic watch
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
        """The log end of partitions 0..partitions-1 (read_uncommitted: the thresholds). Raises
        KafkaException when a leader does not answer, and also for an answer that is no offset:
        right after a failover the admin client handed -1001 (OFFSET_INVALID) as a partition's
        end, and a threshold below the real end would open gates early (testbed cluster).
        The leaders are asked for first: a question sent to a leader that died since the admin
        client last looked waits out the whole timeout while producers are held by the fence."""
        relearn_leaders(self.admin, topic, self.timeout)
        try:
            ends = end_offsets(self.admin, topic, partitions, self.timeout)
        except KafkaException:
            relearn_leaders(self.admin, topic, self.timeout)  # the retry asks the new leaders
            raise
        invalid = {p: end for p, end in ends.items() if end < 0}
        if invalid:
            relearn_leaders(self.admin, topic, self.timeout)
            raise KafkaException(
                KafkaError(KafkaError.OFFSET_NOT_AVAILABLE, f"{topic}: no end offset for {invalid}")
            )
        return ends

    def create_partitions(self, topic: str, count: int, first: int = 0) -> str | None:
        """Raise the topic to ``count`` partitions and return once the leaders of partitions
        ``first``.. (the new ones) serve them. A
        call that failed or timed out although the topic has them (it took effect on the broker,
        or an earlier call did) is fine: returns what happened, for the record; None when the
        call simply succeeded."""
        note = None
        try:
            if (self.partition_count(topic) or 0) < count:  # else created already: only the wait
                future = self.admin.create_partitions(
                    [NewPartitions(topic, count)], request_timeout=self.timeout
                )
                future[topic].result(self.timeout + 5)
        except KafkaException as error:
            if (self.partition_count(topic) or 0) < count:
                raise
            note = f"CreatePartitions failed ({error.args[0]}) but took effect: {topic} has {count}"
        # the new epoch is published only once every partition is served (ordo.topics)
        await_served(self.admin, topic, count, self.timeout, first)
        return note

    def write_history(self, history: EpochHistory) -> None:
        """Write the topic's new history and wait until the log reads it back (a write that is not
        readable has not happened for the clients)."""
        with self._writing:
            self._write(history)

    def record_first(self, history: EpochHistory) -> bool:
        """Write a topic's first history unless the log has one by now (an expansion's fence):
        the writer reads the log to its end under the same lock and never writes over another
        history. Whether it was written. Not ``catch_up``: a reader passes the commit marker
        that ends the log only at its next empty poll, 100 ms a topic, held against the
        publishes waiting for this lock."""
        with self._writing:
            try:
                return self._write(history)
            except StaleHistoryError:  # the log holds another history of the topic
                return False

    def _write(self, history: EpochHistory) -> bool:
        wrote = self.writer.write_checked(history, self.epochs, self.timeout)
        if wrote:
            latest = history.current
            _log.info(
                "epoch log: wrote %s's history (epoch %d %s)", history.topic, latest.epoch, latest.state
            )
        return wrote

    def partition_counts(self) -> dict[str, int]:
        """Every topic's partition count, from one metadata request."""
        topics = self.admin.list_topics(timeout=self.timeout).topics
        return {name: len(t.partitions) for name, t in topics.items() if t.error is None}

    def live_producers(self, topic: str) -> Mapping[str, ProducerReport]:
        """The producers of ``topic`` live now, judged from every report written before this
        call: a reader that lags would count a live producer as gone, and a fence would then not
        wait for it (its records under the old partition count would land after the thresholds).
        A report's age is measured from when this operator read it, not from the producer's
        wall-clock stamp (clock skew between machines would decide otherwise)."""
        if not self.registry.catch_up(self.timeout):
            raise TimeoutError(f"the producer registry is not read to its end: {self.registry.describe()}")
        return self.registry.live(topic)  # by arrival here: a producer's own clock may be off

    def stragglers(self, topic: str, epoch: int) -> Mapping[str, float]:
        """Producers of ``topic`` silent without acknowledging ``epoch`` whose queued records may
        still land, with the seconds left (call after ``live_producers``, which reads the registry
        to its end)."""
        return self.registry.stragglers(topic, epoch, self.straggler_margin)

    def fence_producers(self, transactional_ids: Mapping[str, str]) -> None:
        """Have Kafka fence these producers (by id: their transactional ids), all at once:
        InitProducerId of each id bumps its producer epoch, so the coordinator aborts its open
        transaction (read_committed readers never see it) and every broker refuses its writes
        from then on, whatever the producer's clocks say. Returns once every one is fenced (its
        abort's markers written); raises KafkaException naming the first that failed (the pass
        is retried: fencing twice is harmless)."""
        failures: dict[str, str] = {}

        def fence(producer_id: str, transactional_id: str) -> None:
            try:
                fencer = Producer({**self.config, "transactional.id": transactional_id})
                fencer.init_transactions(self.timeout)
                fencer.flush(0)  # its log lines
            except KafkaException as error:
                failures[producer_id] = f"{transactional_id}: {error.args[0].str()}"

        threads = [
            threading.Thread(target=fence, args=item, name=f"ordo-fence-{item[0]}", daemon=True)
            for item in sorted(transactional_ids.items())
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            first = sorted(failures)[0]
            raise KafkaException(
                KafkaError(
                    KafkaError._FENCED,
                    f"Kafka could not fence {len(failures)} producer(s) ({first}: {failures[first]}); "
                    "the operator needs Write on their transactional ids (prefix 'ordo-producer.')",
                )
            )
        _log.info("fenced through Kafka: %s", ", ".join(sorted(transactional_ids)))

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
_creating: dict[str, threading.Lock] = {}  # one per connection: its clients are made once
_lock = threading.Lock()  # guards the two dicts, never across a network wait


def clients_for(config: Mapping[str, Any], settings: OperatorConfig) -> KafkaSide:
    """The shared clients for this connection config (created on first use). Making them waits on
    the network (up to a minute for a cluster that does not answer): only callers of the same
    connection wait for that, not every handler of every cluster."""
    key = repr(sorted(config.items()))
    with _lock:
        side = _clients.get(key)
        if side is not None:
            return side
        creating = _creating.setdefault(key, threading.Lock())
    with creating:
        with _lock:
            side = _clients.get(key)
        if side is None:
            side = KafkaSide(config, settings)
            with _lock:
                _clients[key] = side
        return side


def known_sides() -> list[KafkaSide]:
    """The clients of every Kafka cluster the operator has talked to so far."""
    with _lock:
        return list(_clients.values())


def close_all() -> None:
    with _lock:
        sides = list(_clients.values())
        _clients.clear()
    for side in sides:
        side.close()
