"""GatedConsumer against the testbed broker: moved keys wait for the old partitions."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from prometheus_client import REGISTRY

from ordo._batch_scan import scan, scan_python
from ordo.epochs import EpochHistory, Gate, stamp
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo.epochs.placement import topic_checks
from ordo.gated_consumer import GatedConsumer
from ordo.kafka_group_protocol import with_classic_defaults
from ordo_testbed.gate_topics import grown_past_transaction_markers, grown_with_a_gated_partition
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed
OLD_RECORDS = 3000


@pytest.fixture
def expanded(kafka: KafkaHandle) -> tuple[str, str]:
    """A topic grown 2 -> 4: partition 0 holds OLD_RECORDS records of epoch 0, partition 2 (new,
    gated on 0) holds 10 records of epoch 1. (topic, epoch log topic)."""
    return grown_with_a_gated_partition(kafka, OLD_RECORDS)


def _drain(consumer: GatedConsumer | Consumer, total: int, timeout: float = 60) -> list[Message]:
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(out) < total and time.monotonic() < deadline:
        for message in consumer.consume(500, 0.2):
            if message.error() is None:
                out.append(message)
    return out


def _held(consumer: GatedConsumer, tp: tuple[str, int], timeout: float = 30) -> Gate:
    """Consume until ``tp``'s gate holds records back (they were fetched and held), and return
    the gate; fails if a record is delivered meanwhile."""

    def held() -> Gate | None:
        delivered = [m.value() for m in consumer.consume(500, 0.1) if m.error() is None]
        assert delivered == [], f"delivered while {tp} should be held: {delivered}"
        return consumer.closed_gates().get(tp)

    gate = wait_for(held, timeout, f"the gate of {tp} to hold its fetched records")
    assert gate is not None
    return gate


def _order_respected(messages: list[Message]) -> bool:
    """No epoch-1 record of partition 2 before the last epoch-0 record of partition 0."""
    last_old = max(i for i, m in enumerate(messages) if m.partition() == 0)
    first_new = min(i for i, m in enumerate(messages) if m.partition() == 2)
    return first_new > last_old


def _config(kafka: KafkaHandle) -> dict[str, object]:
    return kafka.config(group_id=kafka.topic("g"), auto_offset_reset="earliest", session_timeout_ms=6000)


def test_new_partition_waits_for_its_prior_partition(kafka: KafkaHandle, expanded: tuple[str, str]) -> None:
    topic, epochs = expanded
    # The new partition is assigned first, so its records are fetched before partition 0's.
    with GatedConsumer(
        _config(kafka), [topic], epoch_topic=epochs, assignment=[TopicPartition(topic, 2, 0)]
    ) as c:
        assert _held(c, (topic, 2)).waiting_for == {0: OLD_RECORDS}
        closed_since = REGISTRY.get_sample_value("ordo_gate_closed_since_seconds", {"topic": topic})
        assert (
            closed_since is not None and time.time() - 60 < closed_since <= time.time()
        )  # a held gate shows
        c.raw.incremental_assign([TopicPartition(topic, 0, 0)])
        messages = _drain(c, OLD_RECORDS + 10)
        assert len(messages) == OLD_RECORDS + 10
        assert _order_respected(messages)
        assert len(c.gate_waits) == 1 and c.closed_gates() == {}
    labels = {"topic": topic}
    assert REGISTRY.get_sample_value("ordo_gate_wait_seconds_count", labels) == 1, "the SDK metric"
    assert REGISTRY.get_sample_value("ordo_gates_closed", labels) == 0
    assert REGISTRY.get_sample_value("ordo_gate_closed_since_seconds", labels) is None  # none closed


def test_control_a_plain_consumer_reads_the_new_partition_early(
    kafka: KafkaHandle, expanded: tuple[str, str]
) -> None:
    topic, _ = expanded
    consumer = Consumer(_config(kafka))
    consumer.assign([TopicPartition(topic, 2, 0)])
    try:
        first = _drain(consumer, 1, timeout=10)
        consumer.incremental_assign([TopicPartition(topic, 0, 0)])
        messages = first + _drain(consumer, OLD_RECORDS + 10 - len(first))
    finally:
        consumer.close()
    assert len(messages) == OLD_RECORDS + 10
    assert not _order_respected(messages), "without the gate, partition 2 is read before partition 0 ends"


def test_gate_opens_when_another_member_commits_the_prior_partition(
    kafka: KafkaHandle, expanded: tuple[str, str]
) -> None:
    topic, epochs = expanded
    group = kafka.topic("g")
    config = kafka.config(
        group_id=group,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        auto_commit_interval_ms=100,
    )
    # One member assigned only partition 2 (manual assignment keeps the scenario exact): its gate
    # can open only through the group's committed offset of partition 0.
    waiting = GatedConsumer(config, [topic], epoch_topic=epochs, assignment=[TopicPartition(topic, 2, 0)])
    try:
        assert _held(waiting, (topic, 2)).waiting_for == {0: OLD_RECORDS}

        other = Consumer(config)
        other.assign([TopicPartition(topic, 0, 0)])
        assert len(_drain(other, OLD_RECORDS)) == OLD_RECORDS
        # Explicit offsets: with auto-commit on, the consumer may already have committed what it
        # read, and a bare commit() would then fail with "No offset stored".
        other.commit(offsets=[TopicPartition(topic, 0, OLD_RECORDS)], asynchronous=False)
        other.close()

        opened = _drain(waiting, 10, timeout=20)
        assert [m.value() for m in opened] == [f"new-{i}".encode() for i in range(10)]
    finally:
        waiting.close()


def test_a_member_passing_a_threshold_commits_at_once_so_the_gate_it_holds_opens(
    kafka: KafkaHandle, expanded: tuple[str, str]
) -> None:
    """With auto-commit on, the member reading the prior partition commits as soon as it has
    processed up to the threshold, not at its next auto-commit (60 s here): the other member's
    gate opens in well under that."""
    topic, epochs = expanded
    config = kafka.config(
        group_id=kafka.topic("g"), auto_offset_reset="earliest", auto_commit_interval_ms=60_000
    )
    waiting = GatedConsumer(config, [topic], epoch_topic=epochs, assignment=[TopicPartition(topic, 2, 0)])
    reading = GatedConsumer(config, [topic], epoch_topic=epochs, assignment=[TopicPartition(topic, 0, 0)])
    try:
        assert _held(waiting, (topic, 2)).waiting_for == {0: OLD_RECORDS}
        assert len(_drain(reading, OLD_RECORDS)) == OLD_RECORDS
        opened: list[Message] = []

        def gate_opened() -> bool:
            reading.consume(10, 0.05)  # the last record counts as processed now: stored, committed
            opened.extend(m for m in waiting.consume(10, 0.05) if m.error() is None)
            return bool(opened)

        # within 30 s: not at the next auto-commit, 60 s on
        wait_for(gate_opened, timeout=30, what="the gate behind partition 0 to open")
        assert opened[0].value() == b"new-0"
    finally:
        reading.close()
        waiting.close()


def test_a_record_stamped_with_an_epoch_the_log_has_not_shown_waits_for_the_log(kafka: KafkaHandle) -> None:
    """A consumer whose epoch log lags the producers: partition 0 carries epoch-1 records from
    offset 5 on (the first one stamped), but its log still shows epoch 0 only. Judged by that
    log the records would pass; the stamp holds them until the log shows epoch 1. Producers
    stamp only their first record of an epoch in a partition: the unstamped ones after it are
    held too, also once earlier records of the partition have opened its gate."""
    epochs = kafka.topic("epochs")
    ensure_log_topics(kafka.admin, epochs, kafka.topic("producers"))
    topic = kafka.create_topic(2)
    history = EpochHistory.initial(topic, 2)
    writer = EpochLogWriter(kafka.config(), epochs)
    writer.write(history)
    producer = Producer(kafka.config(linger_ms=1))

    def produce(numbers: range) -> None:
        for i in numbers:
            headers: list[tuple[str, str | bytes | None]] = list(stamp(1)) if i == 5 else []
            producer.produce(topic, f"r{i}".encode(), partition=0, headers=headers)
        assert producer.flush(30) == 0

    produce(range(5))
    try:
        with GatedConsumer(
            _config(kafka), [topic], epoch_topic=epochs, assignment=[TopicPartition(topic, 0, 0)]
        ) as consumer:
            assert [m.value() for m in _drain(consumer, 5)] == [f"r{i}".encode() for i in range(5)]
            produce(range(5, 10))  # fetched in a batch of their own, the gate open for r0-r4
            assert _held(consumer, (topic, 0)).unknown_epoch
            kafka.grow(topic, 4)
            writer.write(history.begin_fence(4).publish({0: 5, 1: 0}))
            assert [m.value() for m in _drain(consumer, 5)] == [f"r{i}".encode() for i in range(5, 10)]
            assert consumer.closed_gates() == {}
    finally:
        writer.close()


def test_partitions_waiting_for_each_other_open_past_transaction_markers(kafka: KafkaHandle) -> None:
    """2 -> 3: partition 0's epoch-1 records wait for partition 1's threshold and partition 1's
    for partition 0's. A transactional producer wrote both, so each threshold (an end offset)
    lies just past a commit marker, one offset beyond the last record. The consumer counts the
    markers it passed as processed, or the two gates would wait for each other forever."""
    epochs = kafka.topic("epochs")
    ensure_log_topics(kafka.admin, epochs, kafka.topic("producers"))
    topic = grown_past_transaction_markers(kafka, epochs)
    everything = [TopicPartition(topic, p, 0) for p in (0, 1)]
    with GatedConsumer(_config(kafka), [topic], epoch_topic=epochs, assignment=everything) as consumer:
        values = {m.value() for m in _drain(consumer, 8, timeout=30)}
        assert {b"new-0", b"new-1"} <= values, f"gates still closed: {consumer.closed_gates()}"
        assert len(values) == 8


def test_a_subscribed_member_is_given_the_new_partitions_when_the_epoch_is_published(
    kafka: KafkaHandle, group_protocol: str
) -> None:
    """librdkafka's classic group learns of new partitions only from its periodic metadata
    refresh (every 5 minutes by default), so the moved keys would wait that long; the gated
    consumer asks for metadata when the epoch log publishes the new epoch. A KIP-848 group is
    told by the broker."""
    epochs = kafka.topic("epochs")
    ensure_log_topics(kafka.admin, epochs, kafka.topic("producers"))
    topic = kafka.create_topic(2)
    config = with_classic_defaults(
        kafka.config(group_id=kafka.topic("g"), group_protocol=group_protocol, auto_offset_reset="earliest"),
        session_timeout_ms=6000,
    )
    writer = EpochLogWriter(kafka.config(), epochs)
    with GatedConsumer(config, [topic], epoch_topic=epochs) as consumer:
        wait_for(lambda: not consumer.consume(10, 0.1) and len(consumer.raw.assignment()) == 2, 30, "2 owned")
        history = EpochHistory.initial(topic, 2).begin_fence(4)
        writer.write(history)
        kafka.grow(topic, 4)
        writer.write(history.publish({0: 0, 1: 0}))
        producer = Producer(kafka.config())
        producer.produce(topic, b"moved", partition=3, headers=list(stamp(1)))
        assert producer.flush(10) == 0
        got: list[Message] = []

        def received() -> bool:
            got.extend(consumer.consume(10, 0.1))
            return len(got) > 0

        wait_for(received, 20, "the record of partition 3")
        assert [(m.partition(), m.value()) for m in got] == [(3, b"moved")]
        assert len(consumer.raw.assignment()) == 4
    writer.close()


def test_the_c_look_at_a_consumed_batch_answers_as_the_python_twin(kafka: KafkaHandle) -> None:
    """Consumed records keep their headers in librdkafka until headers() is called (a field a
    built Message never sets): the C pass sees them there. Batches mix partitions, records with
    and without headers, and partition-end events; keyed records placed by hand in a topic whose
    history says 2 -> 3, some of them misplaced, so offsets and keys are read from consumed
    records too."""
    if scan is scan_python:
        pytest.skip("ordo._fastscan was not built, or confluent-kafka's Message changed layout")
    topic = kafka.create_topic(3)
    producer = Producer(kafka.config(linger_ms=5))
    for i in range(600):
        headers: list[tuple[str, str | bytes | None]] | None = [("ordo-epoch", b"1")] if i % 50 == 0 else None
        key = f"k{i}".encode() if i % 7 else None
        producer.produce(topic, f"r{i}".encode(), key=key, partition=i % 3, headers=headers)
    assert producer.flush(30) == 0
    rules = topic_checks(EpochHistory.initial(topic, 2).begin_fence(3).publish({0: 50, 1: 120}).active_epochs)
    consumer = Consumer(kafka.config(group_id=kafka.topic("g"), enable_partition_eof=True))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    seen = {"records": 0, "headers": 0, "misplaced": 0}
    deadline = time.monotonic() + 30
    while seen["records"] < 600 and time.monotonic() < deadline:
        batch = consumer.consume(97, 0.5)  # batches that cut across partitions' runs
        found = scan(batch, rules)  # first: the Python twin's headers() moves librdkafka's headers
        expected = scan_python(batch, rules)
        assert found[:2] == expected[:2]
        assert {p: id(m) for p, m in found[2].items()} == {p: id(m) for p, m in expected[2].items()}
        assert found[3] == expected[3]
        seen["records"] += sum(1 for m in batch if m.error() is None)
        seen["headers"] += found[1]
        seen["misplaced"] += len(found[3])
    consumer.close()
    assert seen["records"] == 600
    assert seen["headers"] > 0  # batches with headers were compared, not only plain ones
    assert seen["misplaced"] > 0  # and batches with misplaced records
