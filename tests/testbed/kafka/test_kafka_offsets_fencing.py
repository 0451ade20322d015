"""Committed offsets across a proxy restart, offsets sent to a transaction, and zombie fencing,
through the real confluent-kafka clients."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ordo.testbed.kafka import KafkaTestbed
from ordo.testbed.kafka.fixtures import KafkaHandle
from ordo.testbed.kafka.testing import consume, values, wait_for

pytestmark = pytest.mark.testbed


def _committed(
    bootstrap: str, group: str, topic: str, partitions: int = 1, isolation: str = "read_committed"
) -> list[int]:
    outsider = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": isolation})
    try:
        found = outsider.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return [tp.offset for tp in found]
    finally:
        outsider.close()


def _member(bootstrap: str, group: str, topic: str, early: list[bytes] | None = None) -> Consumer:
    """A subscribed consumer that has its assignment; what it consumed meanwhile goes to ``early``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
        }
    )
    consumer.subscribe([topic])

    def assigned() -> bool:
        message = consumer.poll(0.05)
        if message is not None:
            assert early is not None, "unexpected message"
            early.append(message.value() or b"")
        return bool(consumer.assignment())

    wait_for(assigned, 20, "an assignment")
    return consumer


def test_offsets_and_generations_survive_a_proxy_restart(tmp_path: Path) -> None:
    with KafkaTestbed(state_dir=tmp_path) as bed:
        admin = AdminClient({"bootstrap.servers": bed.bootstrap})
        admin.create_topics([NewTopic("kept", 2)])["kept"].result(10)
        producer = Producer({"bootstrap.servers": bed.bootstrap})
        for i in range(10):
            producer.produce("kept", b"%d" % i, partition=i % 2)
        assert producer.flush(10) == 0
        got: list[bytes] = []
        member = _member(bed.bootstrap, "survivor", "kept", got)
        try:
            got += values(consume(member, 10 - len(got)))
            member.commit(asynchronous=False)
        finally:
            member.close()
        assert sorted(got) == sorted(b"%d" % i for i in range(10))
        assert _committed(bed.bootstrap, "survivor", "kept", 2) == [5, 5]
        before = admin.describe_consumer_groups(["survivor"])["survivor"].result(10)
        bed.restart_proxy()
        assert _committed(bed.bootstrap, "survivor", "kept", 2) == [5, 5]
        producer.produce("kept", b"after", partition=1)
        assert producer.flush(10) == 0
        later: list[bytes] = []
        resumed = _member(bed.bootstrap, "survivor", "kept", later)
        try:
            assert later + values(consume(resumed, 1 - len(later))) == [b"after"]  # from the commits on
        finally:
            resumed.close()
        admin = AdminClient({"bootstrap.servers": bed.bootstrap})
        assert "survivor" in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
        assert before.state.name == "EMPTY"


def test_offsets_sent_to_a_transaction_follow_its_outcome(kafka: KafkaHandle) -> None:
    source, sink, group = kafka.create_topic(1), kafka.create_topic(1), kafka.topic("g")
    plain = Producer(kafka.config())
    for i in range(6):
        plain.produce(source, b"in-%d" % i, partition=0)
    assert plain.flush(10) == 0
    early: list[bytes] = []
    member = _member(kafka.bootstrap, group, source, early)
    producer = Producer(kafka.config(transactional_id=kafka.topic("tx")))
    producer.init_transactions(20)
    try:
        consume(member, 6 - len(early))
        for outcome, offset in (("commit", 3), ("abort", 6), ("commit", 4)):
            producer.begin_transaction()
            producer.produce(sink, b"out-%d" % offset, partition=0)
            producer.send_offsets_to_transaction(
                [TopicPartition(source, 0, offset)], member.consumer_group_metadata(), 20
            )
            # Open: not yet visible to a reader that accepts unstable offsets.
            assert _committed(kafka.bootstrap, group, source, isolation="read_uncommitted") != [offset]
            if outcome == "commit":
                producer.commit_transaction(20)
            else:
                producer.abort_transaction(20)
            expected = 3 if offset == 6 else offset
            assert _committed(kafka.bootstrap, group, source) == [expected], outcome
    finally:
        member.close()


def _transactional(kafka: KafkaHandle, txn_id: str) -> Producer:
    producer = Producer(kafka.config(transactional_id=txn_id, linger_ms=0))
    producer.init_transactions(20)
    return producer


def _fatal(error: KafkaError) -> bool:
    return bool(error.fatal()) or error.code() == KafkaError._FENCED


def _read_committed(kafka: KafkaHandle, topic: str) -> list[bytes]:
    reader = Consumer(
        kafka.config(group_id=kafka.topic("r"), isolation_level="read_committed", enable_partition_eof=True)
    )
    reader.assign([TopicPartition(topic, 0, 0)])
    try:
        return [v for v in values(consume(reader, until_eof=1)) if isinstance(v, bytes)]
    finally:
        reader.close()


@pytest.mark.parametrize("zombie_next", ["produce", "commit", "send_offsets"])
def test_a_zombie_producer_is_fenced_fatally(kafka: KafkaHandle, zombie_next: str) -> None:
    topic, txn_id = kafka.create_topic(1), kafka.topic("tx")
    zombie = _transactional(kafka, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie-open", partition=0)
    assert zombie.flush(10) == 0
    successor = _transactional(kafka, txn_id)  # same transactional.id: fences the zombie
    with pytest.raises(KafkaException) as info:
        if zombie_next == "produce":
            zombie.produce(topic, b"zombie-late", partition=0)
            zombie.flush(10)
            zombie.commit_transaction(20)
        elif zombie_next == "commit":
            zombie.commit_transaction(20)
        else:
            member = _member(kafka.bootstrap, kafka.topic("g"), topic)
            try:
                zombie.send_offsets_to_transaction(
                    [TopicPartition(topic, 0, 1)], member.consumer_group_metadata(), 20
                )
            finally:
                member.close()
    error: KafkaError = info.value.args[0]
    assert _fatal(error), error
    with pytest.raises(KafkaException) as again:
        zombie.abort_transaction(10)  # fatal: the zombie cannot even abort
    assert _fatal(again.value.args[0])
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=0)
    successor.commit_transaction(20)
    assert _read_committed(kafka, topic) == [b"successor"]
