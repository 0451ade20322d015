"""ordo's murmur2 places every key where librdkafka's murmur2_random (the Java default) does."""

import uuid

import pytest
from confluent_kafka import Producer

from ordo.partitioners import murmur2_partition
from ordo_testbed.kafka.fixtures import KafkaHandle

pytestmark = pytest.mark.testbed


@pytest.mark.parametrize("partitions", [3, 7, 12])
def test_librdkafka_murmur2_random_agrees_for_every_key(kafka: KafkaHandle, partitions: int) -> None:
    topic = kafka.create_topic(partitions)
    keys = [f"customer-{i}".encode() for i in range(300)] + [uuid.uuid4().bytes for _ in range(300)]
    keys += [bytes([i]) * n for i in (0, 127, 128, 255) for n in range(1, 9)]  # sign and tail edge cases
    placed: dict[bytes, int] = {}

    def delivered(error: object, message: object) -> None:
        assert error is None, error
        placed[message.key()] = message.partition()  # type: ignore[attr-defined]

    producer = Producer(kafka.config(partitioner="murmur2_random", linger_ms=5))
    for key in keys:
        producer.produce(topic, key=key, value=b"", on_delivery=delivered)
    assert producer.flush(30) == 0
    assert len(placed) == len(set(keys))
    mismatched = {
        k: (p, murmur2_partition(k, partitions))
        for k, p in placed.items()
        if p != murmur2_partition(k, partitions)
    }
    assert mismatched == {}
