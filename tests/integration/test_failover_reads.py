"""Questions about a partition that no fetch or produce keeps up to date, through a failover (three
brokers): a control topic reader's catch-up (its probe's ListOffsets) and the operator's end offsets
(the expansion's thresholds) follow the leader when it is killed and when it comes back.

librdkafka keeps the leader and leader epoch such a client learnt first until its periodic
metadata refresh (5 minutes): before the fix a probe's question waited in the dead broker's queue
that long (278-292 s in 2 kills of 3), and the operator's was refused FENCED_LEADER_EPOCH for 881 s
once leadership had moved back, or answered -1001 for a partition's end.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import ElectionType, KafkaException, Producer, TopicPartition

from ordo.epochs.log import EpochLog, ensure_log_topics
from ordo_operator.config import OperatorConfig
from ordo_operator.kafka import KafkaSide
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.waiting import wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

# the operator's Kafka timeout (15 s) for a question sent before it relearnt, and a few round trips
SOON = 45.0


def test_partition_questions_follow_the_leader_when_it_is_killed_and_when_it_returns(
    replicated_kafka: KafkaHandle,
) -> None:
    cluster = replicated_kafka.cluster
    assert cluster is not None
    epochs, registry = replicated_kafka.topic("epochs"), replicated_kafka.topic("producers")
    ensure_log_topics(replicated_kafka.admin, epochs, registry)
    data = replicated_kafka.create_topic(3)
    producer = Producer(replicated_kafka.config(acks="all"))
    for p in range(3):
        producer.produce(data, b"x", partition=p)
    producer.produce(epochs, b"not a history", key=b"t")  # a record for the reader to pass
    assert producer.flush(30) == 0
    side = KafkaSide(replicated_kafka.config(), OperatorConfig(epoch_topic=epochs, registry_topic=registry))
    reader = EpochLog(replicated_kafka.config(), epochs)
    try:
        assert reader.catch_up(30)  # its probe has learnt the leader now
        assert side.end_offsets(data, 3) == dict.fromkeys(range(3), 1)

        def answered() -> bool:
            try:
                ends = side.end_offsets(data, 3)
            except KafkaException:
                return False  # the operator retries its step, as here
            assert ends == dict.fromkeys(range(3), 1), f"thresholds {ends}"
            return reader.catch_up(2.0)

        victim = cluster.leader(epochs, 0)
        cluster.kill(victim)
        cluster.await_leaders_moved(victim, 60)
        moved = time.monotonic()
        wait_for(answered, SOON, f"answers from the new leaders after node {victim} died", step=0.2)
        print(f"answered {time.monotonic() - moved:.1f}s after the failover")

        cluster.restart(victim)
        cluster.await_in_sync(victim, 120)
        partitions = [TopicPartition(epochs, 0), *(TopicPartition(data, p) for p in range(3))]
        cluster.admin.elect_leaders(ElectionType.PREFERRED, partitions).result(30)  # leadership moves back
        wait_for(lambda: cluster.leader(epochs, 0) == victim, 30, f"node {victim} to lead {epochs} again")
        back = time.monotonic()
        wait_for(answered, SOON, f"answers once node {victim} leads again", step=0.2)
        print(f"answered {time.monotonic() - back:.1f}s after leadership moved back")
    finally:
        reader.close()
        side.close()
