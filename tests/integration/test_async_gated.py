"""AsyncConsumer with the ordering gate (``gate=True``, issue 35 item 6) against the testbed
broker: what GatedConsumer's gate does (tests/integration/test_gated_consumer.py), with a gate's
progress the records *completed* by the workers, in order, not those handed out."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Message, Producer

from ordo.async_consumer import AsyncConsumer, Batch
from ordo.epochs import EpochHistory, stamp
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo.kafka_group_protocol import CLASSIC, with_classic_defaults
from ordo_testbed.gate_topics import grown_past_transaction_markers
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed
OLD = 200  # records of partition 0 before the expansion: its threshold


@pytest.fixture
def epochs(kafka: KafkaHandle) -> Iterator[tuple[str, EpochLogWriter]]:
    """An epoch log of this test's own, and a writer of it."""
    topic = kafka.topic("epochs")
    ensure_log_topics(kafka.admin, topic, kafka.topic("producers"))
    writer = EpochLogWriter(kafka.config(), topic)
    yield topic, writer
    writer.close()


def _config(kafka: KafkaHandle, group: str, protocol: str = CLASSIC, **extra: Any) -> dict[str, Any]:
    return with_classic_defaults(
        kafka.config(group_id=group, group_protocol=protocol, auto_offset_reset="earliest", **extra),
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
    )


def _produce(
    kafka: KafkaHandle, topic: str, partition: int, values: list[str], epoch: int | None = None
) -> None:
    """``values`` to ``partition``, the first stamped with ``epoch`` if given (as a producer does)."""
    producer = Producer(kafka.config(linger_ms=5))
    for i, value in enumerate(values):
        headers: list[tuple[str, str | bytes | None]] = (
            list(stamp(epoch)) if epoch is not None and i == 0 else []
        )
        producer.produce(topic, value.encode(), partition=partition, headers=headers)
    assert producer.flush(30) == 0


def _values(records: list[Message]) -> list[str]:
    return [(m.value() or b"").decode() for m in records]


def _expanded_1_to_2(kafka: KafkaHandle, writer: EpochLogWriter) -> str:
    """A topic of 2 partitions whose history says 1 -> 2, partition 0's threshold OLD: partition
    1's records wait for partition 0's first OLD records."""
    topic = kafka.create_topic(2)
    writer.write(EpochHistory.initial(topic, 1).begin_fence(2).publish({0: OLD}))
    return topic


def test_a_moved_keys_records_wait_until_the_old_records_are_done_not_merely_handed_out(
    kafka: KafkaHandle, epochs: tuple[str, EpochLogWriter], closing: list[AsyncConsumer]
) -> None:
    """Partition 1's records wait while partition 0's last record before the threshold is
    handed out but not done; done, they come."""
    epoch_topic, writer = epochs
    topic = _expanded_1_to_2(kafka, writer)
    _produce(kafka, topic, 0, [f"old-{i}" for i in range(OLD)])
    _produce(kafka, topic, 1, [f"new-{i}" for i in range(10)])
    consumer = AsyncConsumer(
        _config(kafka, kafka.topic("g")), [topic], ordering="partition", gate=True, epoch_topic=epoch_topic
    )
    closing.append(consumer)
    last: list[Message] = []

    def last_old_handed_out_and_the_gate_held() -> bool:
        for record in consumer.poll(0.05).records:
            assert record.partition() == 0, f"{_values([record])} handed out before old-{OLD - 1} was done"
            if record.offset() == OLD - 1:
                last.append(record)  # handed out, not done
            else:
                consumer.done(record)
        return bool(last) and (topic, 1) in consumer.closed_gates()

    wait_for(last_old_handed_out_and_the_gate_held, 30, "the last old record out and partition 1 held")
    assert consumer.closed_gates()[(topic, 1)].waiting_for == {0: OLD}
    assert consumer.poll(0.2).records == [], "the gate opened before the last old record was done"
    consumer.done(last[0])
    new: list[Message] = []

    def new_records() -> bool:
        batch = consumer.poll(0.05)
        new.extend(batch.records)
        consumer.done_many(batch.records)
        return len(new) == 10

    wait_for(new_records, 30, "partition 1's records once partition 0's are done")
    assert _values(new) == [f"new-{i}" for i in range(10)]
    assert consumer.closed_gates() == {}


def test_the_gate_opens_when_another_member_completes_the_prior_partition_and_commits_at_once(
    kafka: KafkaHandle, epochs: tuple[str, EpochLogWriter], closing: list[AsyncConsumer]
) -> None:
    """Two members, one partition each; the records come once both own theirs. The member of
    partition 1 waits for the group's committed offset of partition 0, which the other member
    commits as soon as its workers have completed the threshold, not at its next aggregated
    commit (60 s here)."""
    epoch_topic, writer = epochs
    topic = _expanded_1_to_2(kafka, writer)
    group = kafka.topic("g")
    members = [
        AsyncConsumer(_config(kafka, group), [topic], gate=True, epoch_topic=epoch_topic, commit_interval=60)
        for _ in range(2)
    ]
    closing.extend(members)
    events: list[tuple[str, str]] = []  # in the order this thread saw them

    def poll_all() -> list[Batch]:
        batches = [member.poll(0.05) for member in members]
        for member, batch in zip(members, batches, strict=True):
            for record in batch.records:
                events.append(("out", _values([record])[0]))
                member.done(record)
                events.append(("done", _values([record])[0]))
        return batches

    wait_for(lambda: poll_all() and all(len(m.assignment()) == 1 for m in members), 30, "one partition each")
    _produce(kafka, topic, 0, [f"old-{i}" for i in range(OLD)])
    _produce(kafka, topic, 1, [f"new-{i}" for i in range(10)])
    wait_for(lambda: poll_all() and sum(e == ("done", "new-9") for e in events), 30, "the new records, done")
    last_old = events.index(("done", f"old-{OLD - 1}"))
    first_new = events.index(("out", "new-0"))
    assert last_old < first_new, events[first_new - 3 : first_new + 3]


def test_a_record_stamped_with_an_epoch_the_log_has_not_shown_waits_for_the_log(
    kafka: KafkaHandle, epochs: tuple[str, EpochLogWriter], closing: list[AsyncConsumer]
) -> None:
    """Partition 0 carries epoch-1 records from offset 5 on (the first one stamped); the log
    still shows epoch 0: the stamp holds them until the log shows epoch 1."""
    epoch_topic, writer = epochs
    topic = kafka.create_topic(2)
    history = EpochHistory.initial(topic, 2)
    writer.write(history)
    _produce(kafka, topic, 0, [f"r{i}" for i in range(5)])
    consumer = AsyncConsumer(_config(kafka, kafka.topic("g")), [topic], gate=True, epoch_topic=epoch_topic)
    closing.append(consumer)
    got: list[Message] = []

    def took(count: int) -> Callable[[], bool]:
        def until() -> bool:
            batch = consumer.poll(0.05)
            got.extend(batch.records)
            consumer.done_many(batch.records)
            return len(got) >= count

        return until

    wait_for(took(5), 30, "the epoch-0 records")
    _produce(kafka, topic, 0, [f"r{i}" for i in range(5, 10)], epoch=1)

    def held() -> bool:
        assert consumer.poll(0.05).records == [], "a record of an epoch the log has not shown went out"
        return (topic, 0) in consumer.closed_gates()

    wait_for(held, 30, "partition 0 held at the stamp")
    assert consumer.closed_gates()[(topic, 0)].unknown_epoch
    kafka.grow(topic, 4)
    writer.write(history.begin_fence(4).publish({0: 5, 1: 0}))
    wait_for(took(10), 30, "the stamped records once the log shows their epoch")
    assert _values(got) == [f"r{i}" for i in range(10)]


def test_partitions_waiting_for_each_other_open_past_transaction_markers(
    kafka: KafkaHandle, epochs: tuple[str, EpochLogWriter], closing: list[AsyncConsumer]
) -> None:
    """2 -> 3, each threshold just past a commit marker, the two new records gated on each
    other's partition (``grown_past_transaction_markers``): the consumer counts the markers passed
    as completed once every record before is done, or the two gates would wait for ever."""
    epoch_topic, _ = epochs
    topic = grown_past_transaction_markers(kafka, epoch_topic)
    consumer = AsyncConsumer(
        _config(kafka, kafka.topic("g"), isolation_level="read_committed"),
        [topic],
        gate=True,
        epoch_topic=epoch_topic,
    )
    closing.append(consumer)
    got: list[str] = []

    def all_eight() -> bool:
        batch = consumer.poll(0.05)
        got.extend(_values(batch.records))
        consumer.done_many(batch.records)
        return len(got) == 8

    wait_for(all_eight, 30, "every record")
    assert {"new-0", "new-1"} <= set(got)


def test_a_member_is_given_the_new_partitions_when_the_epoch_is_published(
    kafka: KafkaHandle, epochs: tuple[str, EpochLogWriter], closing: list[AsyncConsumer], group_protocol: str
) -> None:
    """A classic group learns of new partitions from librdkafka's periodic refresh (5 minutes by
    default); the gated AsyncConsumer asks for metadata when the epoch log publishes them."""
    epoch_topic, writer = epochs
    topic = kafka.create_topic(2)
    consumer = AsyncConsumer(
        _config(kafka, kafka.topic("g"), group_protocol), [topic], gate=True, epoch_topic=epoch_topic
    )
    closing.append(consumer)
    wait_for(lambda: len(consumer.assignment()) == 2, 30, "2 owned")
    history = EpochHistory.initial(topic, 2).begin_fence(4)
    writer.write(history)
    kafka.grow(topic, 4)
    writer.write(history.publish({0: 0, 1: 0}))
    _produce(kafka, topic, 3, ["moved"], epoch=1)
    got: list[Message] = []

    def received() -> bool:
        batch = consumer.poll(0.05)
        got.extend(batch.records)
        consumer.done_many(batch.records)
        return bool(got)

    wait_for(received, 20, "the record of partition 3")
    assert [(m.partition(), m.value()) for m in got] == [(3, b"moved")]
    assert len(consumer.assignment()) == 4
