"""GroupProducer against the testbed (kube-apiserver, Kafka), with the operator's part played by
the test (it writes the assignment annotation), so each SDK rule is checked on its own."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from kubernetes.client import CoordinationV1Api

from ordo.errors import CheckpointError, ConfigError, NotOwnedError, TransactionScopeError
from ordo.group import GroupProducer, Rebalance
from ordo.protocol import ACK_ANNOTATION, ASSIGNMENT_ANNOTATION, GroupSettings, MemberAssignment
from ordo_testbed.kafka import Fault
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import consume, end_offsets
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.pods import PodSet
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed


class Member:
    def __init__(
        self, kafka: KafkaHandle, kube: Kube, epochs: str, registry: str, exactly_once: bool
    ) -> None:
        self.kafka, self.kube = kafka, kube
        self.events: list[Rebalance] = []
        self.topic = kafka.create_topic(2, prefix="data")
        self.settings = GroupSettings(
            session_timeout_seconds=5, exactly_once=exactly_once, checkpoint_topic=kafka.topic("checkpoints")
        )
        self.generation = 0
        self.producer = GroupProducer(
            kafka.config(linger_ms=2),
            namespace=kube.namespace,
            pod="member",
            group="g",
            api_client=kube.api,
            listener=self.events.append,
            epoch_topic=epochs,
            registry_topic=registry,
        )

    def assign(self, *partitions: int) -> None:
        self.generation += 1
        value = MemberAssignment(
            group="g", generation=self.generation, partitions=partitions, settings=self.settings
        ).to_annotation()
        self.kube.core.patch_namespaced_pod(
            "member", self.kube.namespace, {"metadata": {"annotations": {ASSIGNMENT_ANNOTATION: value}}}
        )
        wait_for(lambda: self.events and self.events[-1].generation == self.generation, 30, "the rebalance")

    def acked(self) -> int | None:
        lease = CoordinationV1Api(self.kube.api).read_namespaced_lease("member", self.kube.namespace)
        value = (lease.metadata.annotations or {}).get(ACK_ANNOTATION)  # type: ignore[union-attr]
        return int(value) if value is not None else None

    def committed(self, topic: str) -> list[Any]:
        consumer = Consumer(
            self.kafka.config(
                group_id=self.kafka.topic("v"), isolation_level="read_committed", enable_partition_eof=True
            )
        )
        consumer.assign([TopicPartition(topic, p, 0) for p in range(2 if topic == self.topic else 1)])
        end = sum(consumer.get_watermark_offsets(tp)[1] for tp in consumer.assignment())
        messages = consume(consumer, until_eof=len(consumer.assignment())) if end else []
        consumer.close()
        return [m.value() for m in messages]


@pytest.fixture(params=[True, False], ids=["exactly-once", "at-least-once"])
def member(
    request: pytest.FixtureRequest, kafka: KafkaHandle, kube: Kube, pods: PodSet, log_topics: tuple[str, str]
) -> Iterator[Member]:
    pods.start("member", [sys.executable, "-c", "import time; time.sleep(600)"])
    m = Member(kafka, kube, *log_topics, exactly_once=request.param)
    try:
        yield m
    finally:
        m.producer.close()


def test_assignment_transactions_and_revocation(member: Member) -> None:
    member.assign(0, 1)
    assert member.events[-1].assigned == {0: None, 1: None}
    wait_for(lambda: member.acked() == 1, 10, "the acknowledgement in the Lease")
    with member.producer.transaction(0) as tx:
        tx.produce(member.topic, b"a", b"k")
        with pytest.raises(CheckpointError, match="must be a str"):
            tx.commit(42)  # type: ignore[arg-type]
        tx.commit("after-a")
    assert member.producer.checkpoint(0) is None or member.producer.checkpoint(0) == "after-a"
    wait_for(lambda: member.producer.checkpoint(0) == "after-a", 10, "the checkpoint to be readable")
    assert member.committed(member.topic) == [b"a"]

    member.assign(1)
    assert member.events[-1].revoked == [0]
    with pytest.raises(NotOwnedError, match="source partition 0 is not assigned"):
        member.producer.transaction(0)
    wait_for(lambda: member.acked() == 2, 10, "the acknowledgement of the revocation")
    member.assign(0, 1)
    assert member.events[-1].assigned == {0: "after-a"}, "a re-assigned partition comes with its checkpoint"


def test_a_transaction_left_without_commit_is_aborted_and_says_so(member: Member) -> None:
    member.assign(0)
    with (
        pytest.raises(TransactionScopeError, match="ended without commit"),
        member.producer.transaction(0) as tx,
    ):
        tx.produce(member.topic, b"lost-on-purpose", b"k")
    with member.producer.transaction(0) as tx:
        tx.produce(member.topic, b"kept", b"k")
        tx.commit("1")
    values = member.committed(member.topic)
    if member.settings.exactly_once:
        assert values == [b"kept"]
    else:  # at-least-once: what was sent stays; only the checkpoint was not written
        assert values == [b"lost-on-purpose", b"kept"]
    checkpoints = [json.loads(v)["checkpoint"] for v in member.committed(member.settings.checkpoint_topic)]
    assert checkpoints == ["1"]


def test_bad_configuration_is_refused(
    kube: Kube, kafka: KafkaHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("POD_NAME", "POD_NAMESPACE", "ORDO_GROUP"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigError, match="POD_NAME, POD_NAMESPACE, ORDO_GROUP"):
        GroupProducer.from_env(kafka.config())
    with pytest.raises(ConfigError, match=r"transactional\.id"):
        GroupProducer(
            kafka.config(transactional_id="x"), namespace="n", pod="p", group="g", api_client=kube.api
        )
    with pytest.raises(ConfigError, match="cannot reach Kafka"):
        GroupProducer(
            {"bootstrap.servers": "127.0.0.1:1"}, namespace="n", pod="p", group="g", api_client=kube.api
        )


def test_a_slow_commit_is_resumed_not_repeated(member: Member, kafka: KafkaHandle) -> None:
    """An EndTxn slower than one commit attempt: the commit's outcome is unknown, so the SDK resumes
    it instead of giving the unit up (which would write it twice once the first commit lands)."""
    if not member.settings.exactly_once:
        pytest.skip("transactions only")
    member.assign(0)
    kafka.faults.add(Fault(api="EndTxn", delay=7.0, count=1))
    with member.producer.transaction(0) as tx:
        tx.produce(member.topic, b"once", b"k")
        tx.commit("1")
    assert member.committed(member.topic) == [b"once"]


def test_closing_aborts_a_transaction_left_open(member: Member, kafka: KafkaHandle) -> None:
    """A member closing while a unit is open (the application still inside it after the close's
    wait) aborts it: with no next owner to fence it, read_committed readers of the data and of
    the checkpoint topic would wait for the broker's transaction timeout (the testbed has none)."""
    if not member.settings.exactly_once:
        pytest.skip("transactions only")
    member.assign(0)
    tx = member.producer.transaction(0)
    tx.produce(member.topic, b"abandoned", b"k")
    wait_for(lambda: _ends(kafka, member.topic, "read_uncommitted") > 0, 20, "the record in Kafka")
    assert _ends(kafka, member.topic, "read_committed") == 0, "the transaction is open"
    member.producer.close(timeout=1)
    end = _ends(kafka, member.topic, "read_uncommitted")
    wait_for(lambda: _ends(kafka, member.topic, "read_committed") == end, 20, "the transaction to end")
    assert member.committed(member.topic) == []


def _ends(kafka: KafkaHandle, topic: str, isolation: str) -> int:
    """The sum of the topic's end offsets (read_committed: last stable offsets)."""
    return sum(end_offsets(kafka.bootstrap, topic, 2, isolation).values())


def test_an_assignment_that_fails_to_apply_is_applied_again(member: Member, kafka: KafkaHandle) -> None:
    """Kafka refuses the new owner's transactional producer once: the member must not keep its
    Lease while ignoring the assignment (it would never take nor acknowledge it); it applies the
    same assignment again and acknowledges it."""
    if not member.settings.exactly_once:
        pytest.skip("transactions only")
    refused = kafka.faults.add(
        Fault(api="InitProducerId", error="TRANSACTIONAL_ID_AUTHORIZATION_FAILED", count=1)
    )
    member.assign(0, 1)
    assert refused.hits == 1, "the first attempt was refused"
    assert member.events[-1].assigned == {0: None, 1: None}
    wait_for(lambda: member.acked() == 1, 10, "the acknowledgement in the Lease")
    with member.producer.transaction(1) as tx:
        tx.produce(member.topic, b"after", b"k")
        tx.commit("1")
    assert member.committed(member.topic) == [b"after"]
