"""``ordo bench eos``'s consume-transform-produce loop, one transaction per ``step``.

A step is the unit both drivers need: the command runs its loop's steps back to back, and the
benchmark of pre-registration interleaves transactions with and without it, one by one, so that
both meet the same moments of the broker (whole runs one after the other did not).
"""

from __future__ import annotations

import argparse
import logging
import time
from contextlib import ExitStack
from types import TracebackType

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ordo import OrderedProducer
from ordo.cli import CliError
from ordo.client_config import BrokerErrors, cluster_metadata, drain, logged
from ordo.epochs.log import ensure_log_topics

from .eos_config import EosConfigs

__all__ = ["EosLoop", "records_of"]

_log = logging.getLogger(__name__)


def records_of(messages: list[Message]) -> list[Message]:
    """The records of a consumed batch. Its error events are not records: a fatal one ends the
    loop (CliError), the others (librdkafka retries them itself) are logged as warnings."""
    errors = [error for error in map(Message.error, messages) if error is not None]
    if not errors:  # the usual batch, handed back as it came
        return messages
    for error in errors:
        if error.fatal():
            raise CliError(f"the input consumer failed: {error}")
        _log.warning("input consumer: %s", error)
    return [m for m in messages if m.error() is None]


class EosLoop:
    """Fills ``args.input_topic`` (made when missing, as is the output topic) with ``args.records``
    records ``<run_id>:<number>:`` padded to ``args.record_size``, then, per ``step``, consumes up
    to ``args.transaction_size`` of them and writes one output record each, committing the
    consumer's offsets in the same transaction (declared up front with ``args.pre_registration``).
    Use it as a context manager: leaving closes the clients."""

    def __init__(self, args: argparse.Namespace, configs: EosConfigs, run_id: str) -> None:
        self._args = args
        self.source: str = args.input_topic or f"ordo-eos-in-{run_id}"
        self.sink: str = args.output_topic or f"ordo-eos-out-{run_id}"
        self._make_topics(configs)
        self._fill(configs, run_id)
        self._position: dict[int, int] = {}
        self.commit_latencies: list[float] = []  # seconds, from the offsets sent to the commit's end
        self.transactions = self.records = 0
        # when the first batch came: the group's join before it (seconds on a busy machine) is
        # not the loop's time
        self.first_batch_at: float | None = None
        with ExitStack() as opened:  # closes what was opened when a later step fails
            self._consumer = Consumer(logged({"auto.offset.reset": "earliest", **configs.consumer}))
            opened.callback(self._consumer.close)
            # after the fill: right after its creation a topic's metadata may not list its partitions
            topic = self._consumer.list_topics(self.source, timeout=10).topics[self.source]
            self._ends = {
                p: self._consumer.get_watermark_offsets(TopicPartition(self.source, p), timeout=10)[1]
                for p in topic.partitions
            }
            self._producer = OrderedProducer({"linger.ms": 5, **configs.producer})
            opened.callback(self._producer.close)
            self._consumer.subscribe([self.source])
            self._producer.init_transactions(30)
            opened.pop_all()

    def __enter__(self) -> EosLoop:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def done(self) -> bool:
        """Every input record processed."""
        return all(self._position.get(p, -1) >= end for p, end in self._ends.items() if end > 0)

    def step(self, pre_registration: bool | None = None) -> int:
        """One transaction of the next batch: the records it processed, 0 while none came.
        ``pre_registration``: this transaction's mode, when not ``args.pre_registration``'s."""
        args = self._args
        batch = records_of(self._consumer.consume(args.transaction_size, args.poll_timeout / 1000))
        if not batch:
            return 0
        if self.first_batch_at is None:
            self.first_batch_at = time.monotonic()
        for m in batch:
            self._position[m.partition() or 0] = (m.offset() or 0) + 1
        offsets = [TopicPartition(self.source, p, o) for p, o in self._position.items()]
        if args.pre_registration if pre_registration is None else pre_registration:
            self._declared_transaction(batch, offsets)
        else:
            self._transaction(batch, offsets)
        self.transactions += 1
        self.records += len(batch)
        return len(batch)

    def close(self) -> None:
        self._consumer.close()
        self._producer.close()

    def _transaction(self, batch: list[Message], offsets: list[TopicPartition]) -> None:
        producer = self._producer
        producer.begin_transaction()
        for m in batch:
            producer.produce(self.sink, m.value(), m.key())
        producer.send_offsets_to_transaction(offsets, self._consumer.consumer_group_metadata())
        begun = time.monotonic()
        producer.commit_transaction(30)
        self.commit_latencies.append(time.monotonic() - begun)

    def _declared_transaction(self, batch: list[Message], offsets: list[TopicPartition]) -> None:
        declared = self._producer.partitions_of(self.sink, [m.key() for m in batch])
        group = self._args.consumer_group_id
        with self._producer.transaction(partitions={self.sink: declared}, group_id=group) as tx:
            for m in batch:
                tx.produce(self.sink, m.value(), m.key())
            tx.send_offsets(offsets, self._consumer.consumer_group_metadata())
            begun = time.monotonic()
            tx.commit()
        self.commit_latencies.append(time.monotonic() - begun)

    def _make_topics(self, configs: EosConfigs) -> None:
        errors = BrokerErrors()
        admin = AdminClient(logged({**configs.plain_producer, "error_cb": errors}))
        try:
            cluster_metadata(admin, errors, configs.bootstrap, 10)  # says at once when Kafka is not there
            ensure_log_topics(admin)
            existing = admin.list_topics(timeout=10).topics
            missing = [
                NewTopic(t, self._args.partitions) for t in (self.source, self.sink) if t not in existing
            ]
            for future in admin.create_topics(missing).values() if missing else ():
                future.result(15)
        finally:
            drain(admin)  # its log lines: an admin client is not polled otherwise

    def _fill(self, configs: EosConfigs, run_id: str) -> None:
        """The input: ``<run>:<number>:`` padded to --record-size, keyed by the number."""
        filler = Producer(logged({"linger.ms": 20, **configs.plain_producer}))
        for i in range(self._args.records):
            value = f"{run_id}:{i}:".encode().ljust(self._args.record_size, b"x")
            while True:
                try:
                    filler.produce(self.source, value, str(i).encode())
                    break
                except BufferError:
                    filler.poll(0.05)
        if filler.flush(60):
            raise CliError(f"could not write the input records to {self.source!r}")
