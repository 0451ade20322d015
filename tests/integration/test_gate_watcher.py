"""A GatedConsumer's held gates check the group's progress off the poll thread, batched (issue 35,
item 8): one request names every partition the held gates wait for, and ``consume()`` goes on
handing out other partitions' records while the broker has not answered."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition

from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo.gated_consumer import GatedConsumer
from ordo_testbed.kafka.faults import Fault
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed
UNKNOWN = "unknown for now"  # the warning of a progress round the broker did not answer in time


def _expanded(kafka: KafkaHandle, old: int, records: dict[int, int]) -> tuple[str, str]:
    """A topic of 2 x ``old`` partitions whose history says ``old`` -> 2 x ``old``, each old
    partition's threshold its record count; ``records``: partition -> how many records it holds.
    Returns (topic, epoch log topic)."""
    epochs = kafka.topic("epochs")
    ensure_log_topics(kafka.admin, epochs, kafka.topic("producers"))
    topic = kafka.create_topic(2 * old)
    producer = Producer(kafka.config(linger_ms=5))
    for partition, count in records.items():
        for i in range(count):
            producer.produce(topic, f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0
    thresholds = {p: records.get(p, 0) for p in range(old)}
    writer = EpochLogWriter(kafka.config(), epochs)
    writer.write(EpochHistory.initial(topic, old).begin_fence(2 * old).publish(thresholds))
    writer.close()
    return topic, epochs


@pytest.fixture
def faults(kafka: KafkaHandle) -> Iterator[list[Fault]]:
    """Faults the test adds, removed after it."""
    kafka.require_faults()
    added: list[Fault] = []
    yield added
    for fault in added:
        kafka.faults.remove(fault.id)


def _data(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.error() is None]


def test_held_gates_ask_the_log_starts_of_every_partition_they_wait_for_in_one_request(
    kafka: KafkaHandle, faults: list[Fault]
) -> None:
    """8 -> 16, the 8 new partitions held (nobody committed the old ones): each round asks the
    log starts (no committed offset reaches a threshold) in one ListOffsets naming all 8
    partitions the gates wait for, where the poll thread asked one partition at a time."""
    old = 8
    topic, epochs = _expanded(kafka, old, {p: 2 for p in range(2 * old)})
    new = [TopicPartition(topic, p, 0) for p in range(old, 2 * old)]
    config = kafka.config(group_id=kafka.topic("g"), enable_auto_commit=False)
    with GatedConsumer(config, [topic], epoch_topic=epochs, assignment=new) as consumer:

        def all_held() -> bool:
            assert _data(consumer.consume(100, 0.05)) == [], "a gate let a record through"
            return len(consumer.closed_gates()) == old

        wait_for(all_held, 30, "all 8 gates to hold")
        counted = [Fault(api="ListOffsets", topic=topic, delay=0.0)]
        counted += [Fault(api="ListOffsets", topic=topic, partition=p, delay=0.0) for p in (0, 5)]
        faults.extend(kafka.faults.add(fault) for fault in counted)
        rounds = counted[0]

        def rounds_asked() -> bool:
            assert _data(consumer.consume(100, 0.05)) == [], "a gate let a record through"
            return rounds.hits >= 3

        wait_for(rounds_asked, 30, "three requests for log starts")
        every, first, sixth = (f.hits for f in counted)  # read together: a round may be on meanwhile
    assert every - first <= 1 and every - sixth <= 1, (
        f"{every} requests asked log starts, {first} of them partition 0's and {sixth} partition 5's"
    )


def test_consume_hands_out_other_records_while_the_groups_progress_is_being_asked(
    kafka: KafkaHandle, faults: list[Fault], caplog: pytest.LogCaptureFixture
) -> None:
    """2 -> 4: partition 2 is gated on partition 0, partition 1 flows. The first committed-offset
    query is held 8 s by the fault proxy (the query gives up after 5 s and says so, and what the
    reader sends next waits behind it): a consume() returns partition 1's records while the
    query is held, which the poll thread asking itself could not do. Once the broker answers
    again and the group commits partition 0, the gate opens."""
    topic, epochs = _expanded(kafka, 2, {0: 5, 2: 1})
    assigned = [TopicPartition(topic, 1, 0), TopicPartition(topic, 2, 0)]
    config = kafka.config(group_id=kafka.topic("g"), enable_auto_commit=False)
    held = kafka.faults.add(Fault(api="OffsetFetch", delay=8.0, count=1))
    faults.append(held)
    caplog.set_level(logging.WARNING, logger="ordo")
    producer = Producer(kafka.config())
    with GatedConsumer(config, [topic], epoch_topic=epochs, assignment=assigned) as consumer:

        def handed_out_while_asking() -> bool:
            producer.produce(topic, b"flowing", partition=1)
            assert producer.flush(10) == 0
            got = _data(consumer.consume(100, 0.1))
            assert all(m.partition() == 1 for m in got), "partition 2's gate opened with no progress"
            asking = held.hits > 0 and not any(UNKNOWN in r.getMessage() for r in caplog.records)
            return bool(got) and asking and (topic, 2) in consumer.closed_gates()

        wait_for(handed_out_while_asking, 20, "records of partition 1 while the progress query is held")
        committer = Consumer(config)
        committer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
        committer.close()
        opened: list[Message] = []

        def gate_opened() -> bool:
            opened.extend(m for m in _data(consumer.consume(500, 0.05)) if m.partition() == 2)
            return bool(opened)

        wait_for(gate_opened, 60, "partition 2's gate to open once partition 0 is committed")
        assert opened[0].value() == b"2-0"


def test_a_gate_opens_when_what_it_waits_for_was_deleted_before_anyone_read_it(kafka: KafkaHandle) -> None:
    """Records deleted from partition 0 up to its threshold (as retention would) are as good as
    processed: the gate reads the log start where the group's committed offset falls short."""
    topic, epochs = _expanded(kafka, 2, {0: 10, 2: 1})
    config = kafka.config(group_id=kafka.topic("g"), enable_auto_commit=False)
    with GatedConsumer(
        config, [topic], epoch_topic=epochs, assignment=[TopicPartition(topic, 2, 0)]
    ) as consumer:

        def held() -> bool:
            assert _data(consumer.consume(10, 0.05)) == []
            return (topic, 2) in consumer.closed_gates()

        wait_for(held, 30, "partition 2's gate to hold")
        assert consumer.closed_gates()[(topic, 2)].waiting_for == {0: 10}
        deleted = kafka.admin.delete_records([TopicPartition(topic, 0, 10)])
        for future in deleted.values():
            future.result(10)
        opened: list[Message] = []

        def gate_opened() -> bool:
            opened.extend(_data(consumer.consume(10, 0.05)))
            return bool(opened)

        wait_for(gate_opened, 30, "the gate to open on partition 0's log start")
        assert [m.value() for m in opened] == [b"2-0"]
