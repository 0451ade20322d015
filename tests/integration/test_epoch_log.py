"""The epoch log through a real broker: the writer's histories reach every reader, in order."""

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ordo.epochs import EpochHistory
from ordo.epochs.liveness import ProducerLiveness, ProducerReport
from ordo.epochs.log import (
    MISSING_TOPIC_SECONDS,
    STARTUP_READ_SECONDS,
    EpochLog,
    EpochLogWriter,
    ensure_log_topics,
    refuse_unread,
)
from ordo.errors import ConfigError
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import wait_for

pytestmark = pytest.mark.testbed


def test_readers_see_every_history_and_ignore_garbage(kafka: KafkaHandle) -> None:
    log_topic = kafka.topic("epochs")
    ensure_log_topics(kafka.admin, log_topic, kafka.topic("producers"))
    ensure_log_topics(kafka.admin, log_topic, kafka.topic("producers"))  # idempotent
    writer = EpochLogWriter(kafka.config(), log_topic)
    first = EpochHistory.initial("orders", 3)
    writer.write(first)

    early = EpochLog(kafka.config(), log_topic)
    try:
        assert early.catch_up(15)
        assert early.history("orders") == first
        seen: list[int] = []
        early.subscribe(lambda h: seen.append(len(h.epochs)))

        garbage = Producer(kafka.config())
        garbage.produce(log_topic, key=b"orders", value=b"\x00not json")
        garbage.produce(log_topic, key=b"payments", value=first.model_dump_json().encode())  # wrong key
        assert garbage.flush(10) == 0
        fenced = first.begin_fence(6)
        writer.write(fenced)
        done = fenced.publish({0: 1, 1: 2, 2: 3})
        writer.write(done)

        assert early.wait_for(lambda: early.history("orders") == done, 15)
        # subscribers are told after the history changes
        wait_for(lambda: seen == [2, 2], 5, "the subscriber to see both histories")
        assert early.invalid_records == 2
        assert early.history("payments") is None

        late = EpochLog(kafka.config(), log_topic)  # a reader that starts later replays to the same state
        try:
            assert late.catch_up(15) and late.history("orders") == done
        finally:
            late.close()
    finally:
        early.close()
        writer.close()


def test_a_missing_log_reads_as_no_history(kafka: KafkaHandle) -> None:
    log = EpochLog(kafka.config(), kafka.topic("absent"))
    try:
        assert log.history("orders") is None
    finally:
        log.close()


def test_a_reader_reads_up_to_an_end_offset_its_caller_read(kafka: KafkaHandle) -> None:
    # Spark's driver reads the log's end after the data's watermarks, then plans with the history
    # read up to that end: every epoch below it must be in the history read_up_to() returns to
    log_topic = kafka.topic("epochs")
    ensure_log_topics(kafka.admin, log_topic, kafka.topic("producers"))
    writer = EpochLogWriter(kafka.config(), log_topic)
    history = EpochHistory.initial("orders", 3)
    writer.write(history)
    history = history.begin_fence(6)
    writer.write(history)
    probe = Consumer({**kafka.config(), "group.id": "probe"})
    log = EpochLog(kafka.config(), log_topic)
    try:
        _, end = probe.get_watermark_offsets(TopicPartition(log_topic, 0), timeout=10, cached=False)
        assert end > 0
        assert log.read_up_to(end, 15), log.describe()
        assert log.history("orders") == history
    finally:
        log.close()
        probe.close()
        writer.close()
    absent = EpochLog(kafka.config(), kafka.topic("absent"))
    try:
        assert absent.read_up_to(0, 0)  # an empty or missing log: nothing to wait for
    finally:
        absent.close()


def test_a_reader_catches_up_with_a_log_written_faster_than_it_fetches(kafka: KafkaHandle) -> None:
    # librdkafka says a partition is at its end only when a fetch finds nothing new; producers
    # reporting to the registry write more often than a fetch waits (500 ms), so a reader that
    # waited for that signal never knew it was caught up (the operator refused to start, "cannot
    # read ordo's log topics", in about 1 ordering scenario in 10). Caught up = at the high watermark.
    epochs, registry = kafka.topic("epochs"), kafka.topic("producers")
    ensure_log_topics(kafka.admin, epochs, registry)
    stop = threading.Event()

    def report() -> None:
        writer = Producer({**kafka.config(), "linger.ms": 0})
        i = 0
        while not stop.wait(0.05):  # a steady rate, not synchronisation
            report = ProducerReport(producer_id=f"p{i % 4}", topics=("orders",), session_timeout_ms=1000,
                                    reported_at_ms=int(time.time() * 1000))  # fmt: skip
            writer.produce(registry, key=report.producer_id.encode(), value=report.model_dump_json().encode())
            writer.poll(0)
            i += 1
        writer.flush(10)

    thread = threading.Thread(target=report)
    thread.start()
    try:
        first = ProducerLiveness(kafka.config(), registry)
        wait_for(lambda: len(first.snapshot()) == 4, 15, "every producer's first report")
        first.close()
        reader = ProducerLiveness(kafka.config(), registry)
        try:
            assert reader.catch_up(15), reader.describe()
            assert set(reader.snapshot()) == {"p0", "p1", "p2", "p3"}
        finally:
            reader.close()
    finally:
        stop.set()
        thread.join(15)


def test_a_history_over_kafkas_default_record_size_is_written_and_read(kafka: KafkaHandle) -> None:
    """100 expansions of a topic up to 2,016 partitions: 1.7 MB of JSON, over Kafka's 1 MB
    default. The log topic takes 8 MB records and the writer compresses them."""
    epochs, registry = kafka.topic("epochs"), kafka.topic("producers")
    ensure_log_topics(kafka.admin, epochs, registry)
    history = EpochHistory.initial("big", 16)
    while len(history.epochs) <= 100:
        count = history.active.partitions
        history = history.begin_fence(count + 20).publish({p: 10**9 + p for p in range(count)})
    assert len(history.model_dump_json()) > 1_500_000
    writer = EpochLogWriter(kafka.config(), epochs)
    try:
        writer.write(history)
    finally:
        writer.close()
    log = EpochLog(kafka.config(), epochs)
    try:
        assert log.catch_up(30), log.describe()
        assert log.history("big") == history
    finally:
        log.close()


def test_a_client_refuses_to_start_on_an_epoch_log_that_does_not_exist_and_says_which(
    kafka: KafkaHandle,
) -> None:
    """A wrong epoch topic (or no operator yet) is refused after MISSING_TOPIC_SECONDS, not after the
    minute a slow but existing log is waited for, and the error names the topic and the server."""
    missing = kafka.topic("no-epoch-log")
    log = EpochLog(kafka.config(), missing)
    began = time.monotonic()
    try:
        with pytest.raises(ConfigError, match=f"cannot read the epoch log '{missing}' at {kafka.bootstrap}"):
            refuse_unread(log, kafka.bootstrap)
    finally:
        log.close()
    assert MISSING_TOPIC_SECONDS <= time.monotonic() - began < STARTUP_READ_SECONDS
