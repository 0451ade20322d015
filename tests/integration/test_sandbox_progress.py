"""What a sandbox drain that stops short prints: each partition's end, last stable offset and the
readers' committed offset, read from the testbed broker."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ordo_sandbox.scenario.progress import partition_progress
from ordo_testbed.kafka.fixtures import KafkaHandle

pytestmark = pytest.mark.testbed


def test_partition_progress_shows_an_open_transaction_and_the_group_offsets(kafka: KafkaHandle) -> None:
    topic, group = kafka.create_topic(2), kafka.topic("readers")
    plain = Producer({"bootstrap.servers": kafka.bootstrap})
    for _ in range(3):
        plain.produce(topic, b"v", partition=0)
    assert plain.flush(30) == 0
    open_txn = Producer(kafka.config(transactional_id=kafka.topic("tx")))
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    open_txn.produce(topic, b"pending", partition=1)
    assert open_txn.flush(30) == 0
    reader = Consumer(kafka.config(group_id=group))
    reader.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    reader.close()
    try:
        progress = partition_progress(kafka.bootstrap, topic, group)
        assert progress == "p0 end 3 stable 3 group 2; p1 end 1 stable 0 group none"
    finally:
        open_txn.abort_transaction(30)
