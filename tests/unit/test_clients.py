"""librdkafka's own lines go through Python logging (logger ``ordo.librdkafka``), never raw to
stderr, for the clients ordo creates; internal consumers get consumer-side properties only.

"An unreachable broker" is a closed local port: the clients fail to connect at once and say so."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ordo._clients import (
    PRODUCER_ONLY,
    assign_known,
    bounded_delivery,
    consumer_side,
    quick_transaction_retries,
)
from ordo._compacted import reader_config
from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLog, EpochLogWriter
from ordo.errors import ConfigError
from ordo.gated_consumer import GatedConsumer
from ordo.ordered_producer import OrderedProducer
from ordo_testbed.waiting import wait_for

UNREACHABLE = {"bootstrap.servers": "127.0.0.1:1"}
# librdkafka's own stderr format: %<level>|<seconds>|<facility>|<client>| <message>
RAW_LINE = re.compile(r"^%\d\|\d+\.\d+\|", re.MULTILINE)

# a value librdkafka accepts for each producer-only property
PRODUCER_VALUES: dict[str, Any] = {
    "transactional.id": "t", "transaction.timeout.ms": 60000, "enable.idempotence": True,
    "enable.gapless.guarantee": False, "queue.buffering.max.messages": 1000,
    "queue.buffering.max.kbytes": 1000, "queue.buffering.max.ms": 5, "linger.ms": 5,
    "message.send.max.retries": 3, "retries": 3, "queue.buffering.backpressure.threshold": 1,
    "compression.codec": "lz4", "compression.type": "lz4", "compression.level": 1,
    "batch.num.messages": 100, "batch.size": 10000, "delivery.report.only.error": False,
    "sticky.partitioning.linger.ms": 10, "request.required.acks": 1, "acks": 1,
    "request.timeout.ms": 1000, "message.timeout.ms": 1000, "delivery.timeout.ms": 1000,
    "queuing.strategy": "fifo", "produce.offset.report": True, "partitioner": "murmur2",
    "on_delivery": lambda error, message: None,
}  # fmt: skip


def _lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ordo.librdkafka" and text in r.getMessage()]


def _clients(caplog: pytest.LogCaptureFixture, client_id: str) -> set[str]:
    """The librdkafka clients named ``<client_id>#...`` that logged through Python logging."""
    return set(re.findall(rf"\[({re.escape(client_id)}#\w+-\d+)\]", "\n".join(_lines(caplog, ""))))


def _confwarns(config: dict[str, Any]) -> list[str]:
    """The CONFWARN lines a consumer made from ``config`` logs."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger(f"test.confwarn.{time.monotonic_ns()}")
    logger.addHandler(Collect())
    logger.propagate = False
    consumer = Consumer({"group.id": "g", **config, "logger": logger})
    consumer.poll(0)  # hands the lines over
    consumer.close()
    return [line for line in lines if "CONFWARN" in line]


def test_producer_only_properties_are_what_librdkafka_calls_producer_properties() -> None:
    assert set(PRODUCER_VALUES) == PRODUCER_ONLY
    for name, value in PRODUCER_VALUES.items():
        if name == "on_delivery":  # confluent-kafka's own: a consumer refuses it outright
            with pytest.raises(Exception, match="on_delivery"):
                Consumer({"group.id": "g", name: value})
            continue
        warned = _confwarns({name: value})
        assert any("is a producer property" in line for line in warned), (name, warned)
    # and with them removed, a consumer has nothing to warn about
    assert _confwarns(consumer_side({**UNREACHABLE, **PRODUCER_VALUES})) == []


def test_a_transactional_producer_retries_refused_transaction_requests_after_20_ms() -> None:
    """AddOffsetsToTxn refused while the last commit's markers are written is retried after
    retry.backoff.ms: ordo's transactional producers start it at 20 ms, unless the user chose."""
    plain = {"bootstrap.servers": "k:9092"}
    transactional = {**plain, "transactional.id": "t"}
    assert quick_transaction_retries(transactional) == {**transactional, "retry.backoff.ms": 20}
    assert quick_transaction_retries(plain) == plain
    for chosen in ({"retry.backoff.ms": 250}, {"retry.backoff.max.ms": 10}):
        assert quick_transaction_retries({**transactional, **chosen}) == {**transactional, **chosen}
    Producer(quick_transaction_retries(transactional))  # librdkafka takes it (max stays 1,000 ms)


def test_an_epoch_log_reader_built_from_a_producer_config_warns_about_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = {**UNREACHABLE, "queue.buffering.max.messages": 1000, "linger.ms": 5, "compression.type": "lz4"}
    log = EpochLog(config, "epochs")
    try:
        log.catch_up(0.5)  # the probe too
        wait_for(lambda: _lines(caplog, "Connection refused"), 10, "the reader's lines in logging")
    finally:
        log.close()
    assert _lines(caplog, "CONFWARN") == []


def _quiet_on_stderr(
    use: Callable[[], None], capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    use()
    err = capfd.readouterr().err
    assert not RAW_LINE.search(err), err[:2000]
    assert _lines(caplog, "Connection refused"), "the client's lines did not reach Python logging"


def test_the_epoch_log_reader_and_its_probe_log_through_python_logging(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    def use() -> None:
        log = EpochLog(UNREACHABLE, "epochs")
        try:
            assert not log.catch_up(0.5)
            # both, while they live: the reader's thread polls it, catch_up() drains the probe
            wait_for(lambda: len(_clients(caplog, "rdkafka")) == 2, 10, "the reader's and the probe's lines")
        finally:
            log.close()

    _quiet_on_stderr(use, capfd, caplog)


def test_the_epoch_log_writer_logs_through_python_logging(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    def use() -> None:
        writer = EpochLogWriter({**UNREACHABLE, "message.timeout.ms": 500}, "epochs")
        with pytest.raises(RuntimeError):
            writer.write(EpochHistory.initial("orders", 4), timeout=2)
        writer.close()

    _quiet_on_stderr(use, capfd, caplog)


class _CaughtUp(EpochLog):
    """An epoch log reader that claims to be caught up, so that the client under test gets built."""

    def catch_up(self, timeout: float) -> bool:
        return True


def test_an_ordered_producer_and_its_registry_reporter_log_through_python_logging(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    def use() -> None:
        log = _CaughtUp(UNREACHABLE, "epochs")
        config = {**UNREACHABLE, "client.id": "tested", "message.timeout.ms": 500}
        producer = OrderedProducer(config, session_timeout=0.3, epoch_log=log)
        # the heartbeat flushes the reporter every 0.1 s, the committer thread polls the producer
        # itself while it starts its transactions: both clients' lines arrive while they run
        wait_for(lambda: len(_clients(caplog, "tested")) == 2, 10, "both clients' lines in logging")
        producer.close(1)
        log.close()

    _quiet_on_stderr(use, capfd, caplog)
    assert len(_clients(caplog, "tested")) == 2, _clients(caplog, "tested")  # producer and reporter


def test_a_gated_consumer_logs_through_python_logging(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    def use() -> None:
        log = _CaughtUp(UNREACHABLE, "epochs")
        consumer = GatedConsumer(
            {**UNREACHABLE, "group.id": "g", "client.id": "tested"}, ["orders"], epoch_log=log
        )
        deadline = time.monotonic() + 10
        while not _clients(caplog, "tested") and time.monotonic() < deadline:
            consumer.poll(0.1)  # a consumer's lines arrive when it is polled
        consumer.close()
        log.close()

    _quiet_on_stderr(use, capfd, caplog)
    assert _clients(caplog, "tested"), "the GatedConsumer's consumer logged nothing"


class _Recorder:
    """A consumer that records what it is asked, in order; ``list_topics`` of a topic named
    ``fails`` raises as librdkafka does when no broker answers in time."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def list_topics(self, topic: str, timeout: float) -> None:
        self.calls.append(("list_topics", topic))
        if topic == "fails":
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("assign", [(tp.topic, tp.partition) for tp in partitions]))


def test_a_hand_assignment_asks_each_topics_metadata_once_before_assigning() -> None:
    consumer = _Recorder()
    partitions = [TopicPartition("a", 0), TopicPartition("b", 1), TopicPartition("a", 1)]
    assign_known(consumer, partitions)  # type: ignore[arg-type]  # duck-typed: the calls only
    assert consumer.calls == [
        ("list_topics", "a"),
        ("list_topics", "b"),
        ("assign", [("a", 0), ("b", 1), ("a", 1)]),
    ]


def test_a_topic_whose_metadata_does_not_come_is_assigned_all_the_same() -> None:
    consumer = _Recorder()
    assign_known(consumer, [TopicPartition("fails", 0)])  # type: ignore[arg-type]
    assert consumer.calls == [("list_topics", "fails"), ("assign", [("fails", 0)])]


def test_a_control_topic_reader_fetches_each_record_at_once_whatever_the_users_fetch_size() -> None:
    # a fetch.min.bytes tuned for bulk data held every read of the epoch log for fetch.wait.max.ms
    config = reader_config({"bootstrap.servers": "x", "fetch.min.bytes": 100_000}, "reader-t")
    assert config["fetch.min.bytes"] == 1


def test_an_ordered_producers_delivery_is_bounded_and_idempotent_with_acks_all() -> None:
    config, timeout = bounded_delivery({"bootstrap.servers": "b"})
    assert (config["message.timeout.ms"], timeout, config["enable.idempotence"]) == (30_000, 30_000, True)
    config, timeout = bounded_delivery({"delivery.timeout.ms": 5000, "acks": "all"})
    assert timeout == 5000 and "message.timeout.ms" not in config and config["enable.idempotence"] is True
    config, timeout = bounded_delivery({"transactional.id": "t", "transaction.timeout.ms": 10_000})
    assert timeout == 10_000 == config["message.timeout.ms"], "librdkafka refuses more than the transaction's"
    for weaker in ({"acks": 1}, {"request.required.acks": "0"}, {"enable.idempotence": False}):
        with pytest.raises(ConfigError, match=r"acks=all|idempotence"):
            bounded_delivery(weaker)  # nothing silently weakens the promise
    with pytest.raises(ConfigError, match="must be positive"):
        bounded_delivery({"message.timeout.ms": 0})
    with pytest.raises(ConfigError, match="differ"):
        bounded_delivery({"message.timeout.ms": 1000, "delivery.timeout.ms": 2000})
