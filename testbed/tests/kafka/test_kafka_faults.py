"""Fault injection through the proxy, observed with the real confluent-kafka clients."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import NewPartitions
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from ordo_testbed.kafka import Fault, KafkaTestbed, RemoteFaults
from ordo_testbed.kafka.client import UpstreamClient
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import consume, values, wait_for

pytestmark = pytest.mark.testbed


def _deliver(producer: Producer, topic: str, value: bytes, partition: int) -> KafkaError | None:
    outcome: list[KafkaError | None] = []

    def report(error: KafkaError | None, message: Message) -> None:
        outcome.append(error)

    producer.produce(topic, value, partition=partition, on_delivery=report)
    producer.flush(20)
    assert outcome, "no delivery report"
    return outcome[0]


def test_error_fault_is_retried_for_its_count_then_clears(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(2)
    fault = kafka.faults.add(
        Fault(api="Produce", topic=topic, partition=1, error=ErrorCode.not_leader_or_follower, count=3)
    )
    producer = Producer(kafka.config(enable_idempotence=True, retry_backoff_ms=20, linger_ms=0))
    assert _deliver(producer, topic, b"x", 1) is None  # retriable: librdkafka retried past the fault
    assert fault.hits == 3 and fault not in kafka.faults.snapshot()
    consumer = Consumer(kafka.config(group_id=kafka.topic("g"), enable_partition_eof=True))
    consumer.assign([TopicPartition(topic, 1, 0)])
    try:
        assert values(consume(consumer, until_eof=1)) == [b"x"]  # rejected attempts wrote nothing
    finally:
        consumer.close()


def test_error_fault_hits_only_its_partition(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(2)
    kafka.faults.add(Fault(api="Produce", topic=topic, partition=0, error="INVALID_RECORD"))
    producer = Producer(kafka.config(linger_ms=0))
    error = _deliver(producer, topic, b"denied", 0)
    assert error is not None and error.code() == KafkaError.INVALID_RECORD
    assert _deliver(producer, topic, b"fine", 1) is None


@pytest.mark.parametrize("effect", ["delay", "late"])  # held before / after the broker acts
def test_delay_and_late_faults_hold_the_response(kafka: KafkaHandle, effect: str) -> None:
    topic = kafka.create_topic(1)
    producer = Producer(kafka.config(linger_ms=0))
    assert _deliver(producer, topic, b"warm", 0) is None
    fault = kafka.faults.add(Fault(api="Produce", topic=topic, count=1, **{effect: 1.0}))  # type: ignore[arg-type]
    began = time.monotonic()
    assert _deliver(producer, topic, b"slow", 0) is None
    assert time.monotonic() - began >= 1.0
    assert fault.hits == 1 and fault not in kafka.faults.snapshot()  # used up: nothing more is held
    assert _deliver(producer, topic, b"fast", 0) is None
    assert fault.hits == 1


def test_duration_fault_holds_fetches_back_until_it_expires(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(1)
    producer = Producer(kafka.config())
    assert _deliver(producer, topic, b"x", 0) is None
    fault = kafka.faults.add(
        Fault(api="Fetch", topic=topic, error=ErrorCode.not_leader_or_follower, duration=3.0)
    )
    began = time.monotonic()
    consumer = Consumer(kafka.config(group_id=kafka.topic("g"), retry_backoff_ms=50))
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        assert values(consume(consumer, 1)) == [b"x"]
        assert time.monotonic() - began >= 3.0
        assert fault.hits >= 1
    finally:
        consumer.close()


def test_drop_fault_closes_the_connection_and_clients_recover(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(1)
    producer = Producer(kafka.config())
    assert _deliver(producer, topic, b"x", 0) is None
    fault = kafka.faults.add(Fault(api="Fetch", topic=topic, drop=True, count=2))
    consumer = Consumer(kafka.config(group_id=kafka.topic("g"), reconnect_backoff_ms=20))
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        assert values(consume(consumer, 1)) == [b"x"]
        assert fault.hits == 2
    finally:
        consumer.close()

    async def metadata_on_dropped_connection() -> None:
        host, port = kafka.bootstrap.split(":")
        client = UpstreamClient(host, int(port))
        try:
            request = MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            await client.request(request, timeout=5)
        finally:
            await client.close()

    # Not limited by count: other clients alive in this process (a test session's Spark driver,
    # say) may ask for metadata of every topic meanwhile and would use a single-shot fault up.
    dropping = kafka.faults.add(Fault(api="Metadata", topic=topic, drop=True))
    try:
        with pytest.raises(ConnectionError):
            asyncio.run(metadata_on_dropped_connection())
    finally:
        kafka.faults.remove(dropping.id)


def test_top_level_error_fault(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(1)
    kafka.faults.add(Fault(api="InitProducerId", error=ErrorCode.coordinator_load_in_progress, count=2))
    producer = Producer(kafka.config(transactional_id=kafka.topic("tx")))
    producer.init_transactions(20)  # retriable: the client retries through both injected errors
    producer.begin_transaction()
    producer.produce(topic, b"x")
    producer.commit_transaction(20)
    assert kafka.faults.snapshot() == []


def test_faults_are_controllable_over_http(kafka: KafkaHandle) -> None:
    kafka.require_faults()
    with KafkaTestbed(control_port=0) as bed:
        assert bed.control_url is not None
        remote = RemoteFaults(bed.control_url)
        remote.add(Fault(api="Produce", error="INVALID_RECORD"))
        assert [f.api for f in remote.snapshot()] == ["Produce"]
        producer = Producer({"bootstrap.servers": bed.bootstrap, "linger.ms": 0})
        error = _deliver(producer, "remote", b"x", 0)
        assert error is not None and error.code() == KafkaError.INVALID_RECORD
        remote.clear()
        assert remote.snapshot() == []
        wait_for(lambda: _deliver(producer, "remote", b"y", 0) is None, what="produce after clear")


def test_late_fault_answers_after_the_request_took_effect(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(2)
    fault = kafka.faults.add(Fault(api="CreatePartitions", topic=topic, late=3.0, count=1))
    future = kafka.admin.create_partitions([NewPartitions(topic, 4)], request_timeout=1)[topic]
    with pytest.raises(KafkaException) as timed_out:
        future.result(timeout=10)
    assert timed_out.value.args[0].code() == KafkaError._TIMED_OUT
    assert fault.hits == 1
    # ... yet the broker did it: the topic has the new partitions (once its metadata shows them)
    wait_for(
        lambda: len(kafka.admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4,
        20,
        f"{topic} to have 4 partitions",
    )


def test_metadata_points_clients_at_the_proxy(kafka: KafkaHandle) -> None:
    kafka.require_faults()
    brokers = kafka.admin.list_topics(timeout=10).brokers
    assert {f"{b.host}:{b.port}" for b in brokers.values()} == {kafka.bootstrap}
