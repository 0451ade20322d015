"""Visible partition counts and CreatePartitions through the real confluent-kafka clients."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from ordo.testbed.kafka import KafkaTestbed
from ordo.testbed.kafka.broker import probe
from ordo.testbed.kafka.fixtures import KafkaHandle
from ordo.testbed.kafka.testing import consume, wait_for

pytestmark = pytest.mark.testbed


def _partitions(client: Producer | Consumer | AdminClient, topic: str) -> int:
    metadata = client.list_topics(topic, timeout=10).topics[topic]
    return len(metadata.partitions) if metadata.error is None else 0


def test_topic_grows_from_3_to_8_and_clients_follow(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(3)
    producer = Producer(kafka.config(topic_metadata_refresh_interval_ms=300, linger_ms=0))
    consumer = Consumer(kafka.config(group_id=kafka.topic("g"), auto_offset_reset="earliest"))
    try:
        assert _partitions(producer, topic) == 3
        assert _partitions(consumer, topic) == 3
        kafka.admin.create_partitions([NewPartitions(topic, 8)])[topic].result(10)

        def produce_to_7() -> bool:
            producer.poll(0)
            try:
                producer.produce(topic, b"on-7", partition=7)
            except (BufferError, KafkaException):
                return False
            return True

        # librdkafka refuses an unknown partition locally, so this succeeds only once the
        # producer's own periodic metadata refresh has seen 8 partitions.
        wait_for(produce_to_7, what="producer to see partition 7")
        assert producer.flush(10) == 0
        wait_for(lambda: _partitions(consumer, topic) == 8, what="consumer metadata with 8 partitions")
        consumer.assign([TopicPartition(topic, 7, 0)])
        got = consume(consumer, 1)
        assert (got[0].partition(), got[0].offset(), got[0].value()) == (7, 0, b"on-7")
        assert _partitions(kafka.admin, topic) == 8
    finally:
        consumer.close()


def test_create_partitions_errors_match_kafka(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(4)

    def grow(count: int, validate_only: bool = False, name: str = topic) -> KafkaError | None:
        future = kafka.admin.create_partitions([NewPartitions(name, count)], validate_only=validate_only)[
            name
        ]
        try:
            future.result(10)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            return error
        return None

    smaller, same = grow(2), grow(4)
    assert smaller is not None and smaller.code() == KafkaError.INVALID_PARTITIONS
    assert "currently has 4 partitions" in smaller.str()
    assert same is not None and same.code() == KafkaError.INVALID_PARTITIONS
    unknown = grow(5, name=kafka.topic("missing"))
    assert unknown is not None and unknown.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert grow(6, validate_only=True) is None
    assert _partitions(kafka.admin, topic) == 4  # validate_only changed nothing
    if kafka.max_partitions is not None:
        too_many = grow(kafka.max_partitions + 1)
        assert too_many is not None and too_many.code() == KafkaError.INVALID_PARTITIONS
        assert "testbed max" in too_many.str()
        name = kafka.topic()
        created = kafka.admin.create_topics([NewTopic(name, kafka.max_partitions + 1)])[name]
        with pytest.raises(KafkaException) as info:
            created.result(10)
        assert info.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    assert grow(6) is None
    assert _partitions(kafka.admin, topic) == 6


def test_hidden_partitions_exist_physically_but_answer_unknown(kafka: KafkaHandle) -> None:
    kafka.require_faults()  # needs the proxy (and direct access to Tansu behind it)
    assert kafka.testbed is not None
    topic = kafka.create_topic(2)
    direct = AdminClient({"bootstrap.servers": kafka.testbed.broker.bootstrap})
    assert _partitions(direct, topic) == kafka.testbed.max_partitions
    assert _partitions(kafka.admin, topic) == 2
    consumer = Consumer(kafka.config(group_id=kafka.topic("g")))
    try:
        with pytest.raises(KafkaException) as info:
            consumer.get_watermark_offsets(TopicPartition(topic, 5), timeout=5)
        assert info.value.args[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION)
    finally:
        consumer.close()


def test_delete_topic_forgets_the_count(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(5)
    kafka.admin.delete_topics([topic])[topic].result(10)
    wait_for(lambda: topic not in kafka.admin.list_topics(timeout=10).topics, what="topic gone")
    kafka.create_topic(2, name=topic)
    assert _partitions(kafka.admin, topic) == 2


def test_auto_created_topics_follow_kafka_defaults(kafka: KafkaHandle) -> None:
    produced = kafka.topic("auto")
    producer = Producer(kafka.config())
    producer.produce(produced, b"x")
    assert producer.flush(10) == 0
    assert _partitions(kafka.admin, produced) == 1  # num.partitions=1
    if kafka.testbed is not None:
        direct = AdminClient({"bootstrap.servers": kafka.testbed.broker.bootstrap})
        assert _partitions(direct, produced) == kafka.testbed.max_partitions
        assert kafka.admin.create_partitions([NewPartitions(produced, 3)])[produced].result(10) is None
    # A consumer does not auto-create (allow.auto.create.topics=false by default).
    untouched = kafka.topic("nocreate")
    consumer = Consumer(kafka.config(group_id=kafka.topic("g")))
    try:
        assert _partitions(consumer, untouched) == 0
    finally:
        consumer.close()
    assert untouched not in kafka.admin.list_topics(timeout=10).topics


def test_metadata_points_clients_at_the_proxy(kafka: KafkaHandle) -> None:
    brokers = kafka.admin.list_topics(timeout=10).brokers
    assert {f"{b.host}:{b.port}" for b in brokers.values()} == {kafka.bootstrap}


def test_whole_testbed_starts_in_under_5_seconds(kafka: KafkaHandle) -> None:
    kafka.require_faults()  # only meaningful for the embedded testbed
    began = time.monotonic()
    with KafkaTestbed() as bed:
        host, port = bed.bootstrap.split(":")
        assert probe(host, int(port))
        elapsed = time.monotonic() - began
    print(f"kafka testbed start-up: {elapsed:.3f}s (Tansu + proxy, ready by probe)")
    assert elapsed < 5.0


def test_subscribed_consumer_is_reassigned_after_growth(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(3)
    consumer = Consumer(
        kafka.config(
            group_id=kafka.topic("g"),
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            topic_metadata_refresh_interval_ms=300,
        )
    )
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.1) is None and len(consumer.assignment()) == 3, what="3 assigned")
        kafka.admin.create_partitions([NewPartitions(topic, 8)])[topic].result(10)
        producer = Producer(kafka.config())
        wait_for(lambda: _partitions(producer, topic) == 8, what="producer metadata with 8 partitions")
        producer.produce(topic, b"on-7", partition=7)
        assert producer.flush(10) == 0
        got = consume(consumer, 1)  # only possible once the rebalance assigned partition 7
        assert (got[0].partition(), got[0].value()) == (7, b"on-7")
        assert len(consumer.assignment()) == 8
    finally:
        consumer.close()
