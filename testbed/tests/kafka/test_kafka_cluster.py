"""The testbed's replicated Kafka: three KRaft nodes that replicate every topic (ordo's control
topics too) three times with min ISR 2, and a node killed with SIGKILL whose partitions move, whose
acknowledged writes survive, and which rejoins every ISR when started again."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource

from ordo.epochs.log import ensure_log_topics
from ordo.group.checkpoints import ensure_checkpoint_topic
from ordo.member_wire import transactional_id
from ordo_testbed.kafka.cluster import KafkaCluster
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import consume
from ordo_testbed.waiting import wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.slow]


@pytest.fixture
def cluster(replicated_kafka: KafkaHandle) -> KafkaCluster:
    assert replicated_kafka.cluster is not None
    return replicated_kafka.cluster


def test_every_topic_ordos_control_topics_included_has_three_replicas_and_min_isr_two(
    replicated_kafka: KafkaHandle, cluster: KafkaCluster
) -> None:
    data = replicated_kafka.create_topic(3)
    epochs, registry, checkpoints = (
        replicated_kafka.topic(p) for p in ("epochs", "producers", "checkpoints")
    )
    # created as the operator and the members create them: replication left to the cluster
    ensure_log_topics(replicated_kafka.admin, epochs, registry)
    ensure_checkpoint_topic(replicated_kafka.admin, checkpoints)
    # the coordinators' topics exist once a coordinator is first asked for
    for key, kind in ((transactional_id("ns", "g", 0), "transaction"), ("readers", "group")):
        wait_for(lambda: cluster.coordinator(key, kind), 60, f"a {kind} coordinator")  # noqa: B023
    for topic in (data, epochs, registry, checkpoints, "__transaction_state", "__consumer_offsets"):
        assert cluster.replication(topic) == (3, 2), topic
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    broker = replicated_kafka.admin.describe_configs([resource])[resource].result(10)
    assert broker["unclean.leader.election.enable"].value == "false"


def test_a_killed_leader_moves_its_partitions_keeps_what_it_acknowledged_and_rejoins(
    replicated_kafka: KafkaHandle, cluster: KafkaCluster
) -> None:
    topic = replicated_kafka.create_topic(1)
    producer = Producer({"bootstrap.servers": replicated_kafka.bootstrap, "enable.idempotence": True})
    failed: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failed.append(error)

    def write(first: int) -> None:
        for n in range(first, first + 100):
            producer.produce(topic, str(n).encode(), on_delivery=delivered)
        assert producer.flush(60) == 0

    write(0)
    victim = cluster.leader(topic, 0)
    wait_for(lambda: cluster.coordinator(transactional_id("ns", "g", 0)), 60, "a transaction coordinator")
    txn = next(tid for p in range(64) if cluster.coordinator(tid := transactional_id("ns", "g", p)) == victim)
    cluster.kill(victim)
    cluster.await_leaders_moved(victim, 60)
    assert cluster.leader(topic, 0) not in (victim, -1)
    wait_for(lambda: cluster.coordinator(txn) not in (None, victim), 60, "the coordinator to move")
    write(100)  # one broker down: two replicas are still in sync, so acks=all writes go on
    cluster.restart(victim)
    cluster.await_in_sync(victim, 120)
    assert failed == []

    reader = Consumer({"bootstrap.servers": replicated_kafka.bootstrap, "group.id": "check"})
    reader.assign([TopicPartition(topic, 0, 0)])
    try:
        values = [int(m.value() or b"") for m in consume(reader, 200, timeout=60)]
    finally:
        reader.close()
    assert values == list(range(200))
