"""The epoch log through a real broker: the writer's histories reach every reader, in order."""

import pytest
from confluent_kafka import Producer

from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLog, EpochLogWriter, ensure_log_topics
from ordo.testbed.kafka.fixtures import KafkaHandle

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
        assert early.wait_caught_up(15)
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
        assert seen == [2, 2] and early.invalid_records == 2
        assert early.history("payments") is None

        late = EpochLog(kafka.config(), log_topic)  # a reader that starts later replays to the same state
        try:
            assert late.wait_caught_up(15) and late.history("orders") == done
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
