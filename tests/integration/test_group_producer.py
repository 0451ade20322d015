"""GroupProducer against the testbed (kube-apiserver, Kafka), with the operator's part played by
the test (it writes the assignment annotation), so each SDK rule is checked on its own."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kubernetes.client import CoordinationV1Api

from ordo.errors import (
    CheckpointError,
    ConfigError,
    NotOwnedError,
    ProducerFencedError,
    TransactionScopeError,
)
from ordo.group import Checkpoint, GroupProducer, Rebalance
from ordo.member_wire import (
    ACK_ANNOTATION,
    ASSIGNMENT_ANNOTATION,
    GroupSettings,
    MemberAssignment,
    checkpoint_key,
    transactional_id,
)
from ordo_sandbox.scenario.sources import verify_sources
from ordo_testbed.kafka import Fault
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import consume, end_offsets
from ordo_testbed.kube.apiserver import KubeApiServer
from ordo_testbed.kube.faults import FaultProxy
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.pods import PodSet
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed


class Member:
    def __init__(
        self,
        kafka: KafkaHandle,
        kube: Kube,
        epochs: str,
        registry: str,
        exactly_once: bool,
        api_client: Any = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.kafka, self.kube = kafka, kube
        self.events: list[Rebalance] = []
        self.topic = kafka.create_topic(2, prefix="data")
        self.settings = GroupSettings(
            session_timeout_seconds=5, exactly_once=exactly_once, checkpoint_topic=kafka.topic("checkpoints")
        )
        self.generation = 0
        self.producer = GroupProducer(
            {**kafka.config(linger_ms=2), **(config or {})},
            namespace=kube.namespace,
            pod="member",
            group="g",
            api_client=api_client or kube.api,
            listener=self.events.append,
            epoch_topic=epochs,
            registry_topic=registry,
        )

    def assign(self, *partitions: int, settings: GroupSettings | None = None) -> None:
        self.generation += 1
        value = MemberAssignment(
            group="g", generation=self.generation, partitions=partitions, settings=settings or self.settings
        ).to_annotation()
        self.kube.core.patch_namespaced_pod(
            "member", self.kube.namespace, {"metadata": {"annotations": {ASSIGNMENT_ANNOTATION: value}}}
        )
        wait_for(lambda: self.events and self.events[-1].generation == self.generation, 30, "the rebalance")

    def acked(self) -> int | None:
        lease = CoordinationV1Api(self.kube.api).read_namespaced_lease("member", self.kube.namespace)
        value = (lease.metadata.annotations or {}).get(ACK_ANNOTATION)  # type: ignore[union-attr]
        return int(value) if value is not None else None

    def holder(self) -> str | None:
        lease = CoordinationV1Api(self.kube.api).read_namespaced_lease("member", self.kube.namespace)
        return lease.spec.holder_identity  # type: ignore[union-attr]

    def commit(self, partition: int, checkpoint: str, value: bytes = b"x") -> None:
        """One unit, committed, and its checkpoint readable by the member."""
        with self.producer.transaction(partition) as tx:
            tx.produce(self.topic, value, b"k")
            tx.commit(checkpoint)
        wait_for(
            lambda: self.producer.checkpoint(partition) == checkpoint, 10, "the checkpoint to be readable"
        )

    def committed(self, topic: str) -> list[Any]:
        """The committed records of ``topic``, read once every transaction written to it is
        resolved: commit_transaction() returns before the markers are written, and until then
        the last stable offset hides the transaction just committed."""
        partitions = range(2 if topic == self.topic else 1)
        wait_for(
            lambda: (
                end_offsets(self.kafka.bootstrap, topic, partitions, "read_committed")
                == end_offsets(self.kafka.bootstrap, topic, partitions)
            ),
            30,
            f"{topic}'s transactions resolved",
        )
        consumer = Consumer(
            self.kafka.config(
                group_id=self.kafka.topic("v"), isolation_level="read_committed", enable_partition_eof=True
            )
        )
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
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


def test_a_unit_left_open_through_a_revocation_refuses_its_next_record(member: Member) -> None:
    """The revocation waits for the open unit up to the session timeout, then takes the partition
    anyway: the unit's next record is refused (produce() checks no lock, only the unit's mark)."""
    member.assign(0, 1)
    tx = member.producer.transaction(0)
    tx.produce(member.topic, b"before", b"k")
    member.assign(1)  # returns once the rebalance is delivered: after the wait for the unit
    with pytest.raises(NotOwnedError, match="taken from member member during the transaction"):
        tx.produce(member.topic, b"after", b"k")
    with pytest.raises(NotOwnedError):
        tx.commit("never")


def test_exactly_once_records_take_the_c_path(
    kafka: KafkaHandle, kube: Kube, pods: PodSet, log_topics: tuple[str, str]
) -> None:
    """A unit's plain keyed records go to librdkafka in one C call (ordo/_fastproduce.c), as a
    lone OrderedProducer's do: not even a Python frame of the unit's own. Once the unit is over,
    produce() is the checking method again."""
    pods.start("member", [sys.executable, "-c", "import time; time.sleep(600)"])
    member = Member(kafka, kube, *log_topics, exactly_once=True)
    try:
        member.assign(0)
        keys = [f"k{i}".encode() for i in range(10)]
        served: list[int] = []
        for round_ in range(3):
            with member.producer.transaction(0) as tx:
                fast: Any = tx.produce
                assert hasattr(fast, "fast_calls"), (
                    "ordo._fastproduce was not built (pip install -e . needs a compiler)"
                )
                for key in keys:
                    tx.produce(member.topic, b"v", key)
                tx.commit(str(round_))
            served.append(fast.fast_calls)
            with pytest.raises(TransactionScopeError, match="already committed"):
                tx.produce(member.topic, b"late", b"k0")
        # Python serves the first unit's first records (it learns the topic, stamps each partition)
        assert served[1:] == [len(keys)] * 2, served
        assert member.committed(member.topic).count(b"v") == 3 * len(keys)
    finally:
        member.producer.close()


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
    checkpoints = [json.loads(v) for v in member.committed(member.settings.checkpoint_topic)]
    assert [c["checkpoint"] for c in checkpoints if not c.get("takeover")] == ["1"]
    claimed = [] if member.settings.exactly_once else [True]  # at-least-once: it claimed the partition first
    assert [c.get("takeover", False) for c in checkpoints] == [*claimed, False]


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

    def ended() -> bool:  # the record and its transaction's marker, all stable
        end = _ends(kafka, member.topic, "read_uncommitted")
        return end >= 2 and _ends(kafka, member.topic, "read_committed") == end

    wait_for(ended, 20, "the transaction to end")
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


def test_subscribe_hands_each_rebalance_with_the_whole_current_assignment(member: Member) -> None:
    """The README's main loop: ``for change in member.subscribe()``. Each event carries the whole
    map the member owns after it, with checkpoints, not only what changed (KIP-509's partitionmap)."""
    followed: list[Rebalance] = []

    def follow() -> None:
        for change in member.producer.subscribe():
            followed.append(change)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    member.assign(0, 1)
    member.commit(0, "c0")
    member.commit(1, "c1")
    member.assign(1)
    member.assign(0, 1)
    wait_for(lambda: len(followed) == 3, 10, "subscribe() to hand over every event")
    member.producer.close()
    reader.join(10)
    assert not reader.is_alive(), "subscribe() ends when the member closes"
    assert followed == member.events, "subscribe() and the listener see the same events, in order"
    assert [(e.assigned, e.revoked, e.assignment) for e in followed] == [
        ({0: None, 1: None}, [], {0: None, 1: None}),
        ({}, [0], {1: "c1"}),
        ({0: "c0"}, [], {0: "c0", 1: "c1"}),
    ]


def test_a_partition_a_newer_owner_fenced_is_lost_for_good_and_the_rest_of_the_assignment_stays(
    member: Member, kafka: KafkaHandle
) -> None:
    if not member.settings.exactly_once:
        pytest.skip("transactions only: fencing is a Kafka transaction's")
    member.assign(0, 1)
    member.commit(1, "c1")
    # source partition 0's newer owner (as after a handoff this member missed): its
    # init_transactions fences this member's producer, and its first unit commits a checkpoint of
    # its newer generation
    owner = Producer(kafka.config(transactional_id=transactional_id(member.kube.namespace, "g", 0)))
    owner.init_transactions(30)
    owner.begin_transaction()
    newer = Checkpoint.now("theirs", "other-member", member.generation + 1)
    owner.produce(
        member.settings.checkpoint_topic, newer.encode(), checkpoint_key(member.kube.namespace, "g", 0)
    )
    owner.commit_transaction(30)
    wait_for(lambda: member.producer.checkpoint(0) == "theirs", 10, "the new owner's checkpoint read")
    with (
        pytest.raises(ProducerFencedError, match="dropped: a checkpoint of generation 2"),
        member.producer.transaction(0) as tx,
    ):
        tx.produce(member.topic, b"late", b"k")
        tx.commit("late")
    lost = member.events[-1]
    assert (lost.lost, lost.retaking, lost.assigned, lost.revoked) == ([0], {}, {}, [])
    assert lost.assignment == {1: "c1"}
    assert member.producer.owned() == [1]
    with pytest.raises(NotOwnedError, match="source partition 0 is not assigned"):
        member.producer.transaction(0)
    assert member.committed(member.topic) == [b"x"], "the fenced unit is not in Kafka"


def source_record(p: int, seq: int, generation: int) -> bytes:
    """A record as ``ordo_sandbox.scenario.group_member`` writes it, for the source verifier."""
    return json.dumps({"p": p, "seq": seq, "member": "member", "generation": generation}).encode()


def copy(member: Member, p: int, start: int, end: int, batch: int = 5) -> None:
    """Copy source records ``start``..``end - 1`` of ``p`` in units of ``batch``, each committed
    with the checkpoint "next record to copy"; returns once the last one is readable."""
    for first in range(start, end, batch):
        last = min(first + batch, end)
        with member.producer.transaction(p) as tx:
            for seq in range(first, last):
                tx.produce(member.topic, source_record(p, seq, tx.generation), f"src-{p}".encode())
            tx.commit(str(last))
    wait_for(lambda: member.producer.checkpoint(p) == str(end), 10, "the checkpoint to be readable")


@pytest.mark.parametrize("fault", ["coordinator timeout", "fenced from outside"])
def test_a_unit_whose_producer_failed_without_a_new_owner_is_taken_back_and_done_again(
    fault: str, kafka: KafkaHandle, kube: Kube, pods: PodSet, log_topics: tuple[str, str]
) -> None:
    """A unit's producer becomes unusable while the member still owns its partition: the
    coordinator aborted the unit's transaction, held open past ``transaction.timeout.ms``; or
    InitProducerId on its transactional id from outside, as the operator fences a silent unit at
    an expansion. Kafka says ``_FENCED`` for both, as for a new owner, but no newer owner has it:
    the member takes it back (``lost``, then ``assigned`` with the checkpoint) and the unit is done
    again from there, so the source verifier finds every record exactly once."""
    pods.start("member", [sys.executable, "-c", "import time; time.sleep(600)"])
    timeout = {"transaction.timeout.ms": 2000} if fault == "coordinator timeout" else {}
    member = Member(kafka, kube, *log_topics, exactly_once=True, config=timeout)
    try:
        member.assign(0, 1)
        copy(member, 0, 0, 10)
        copy(member, 1, 0, 10)
        before = _ends(kafka, member.topic, "read_uncommitted")
        tx = member.producer.transaction(0)
        for seq in range(10, 15):
            tx.produce(member.topic, source_record(0, seq, tx.generation), b"src-0")
        if fault == "coordinator timeout":
            # held open past its timeout: the coordinator aborts it (a marker after its 5 records)
            wait_for(
                lambda: (
                    _ends(kafka, member.topic, "read_committed")
                    == _ends(kafka, member.topic, "read_uncommitted")
                    >= before + 6
                ),
                30,
                "the coordinator to abort the open unit",
            )
        else:
            wait_for(lambda: _ends(kafka, member.topic, "read_uncommitted") >= before + 5, 20, "the records")
            operator = Producer(kafka.config(transactional_id=transactional_id(kube.namespace, "g", 0)))
            operator.init_transactions(30)  # fences the unit's producer and aborts the open unit
        with pytest.raises(ProducerFencedError, match="takes it back in 1s"):
            tx.commit("15")
        lost = member.events[-1]
        assert (lost.lost, lost.retaking, lost.assignment) == ([0], {0: 1.0}, {1: "10"})
        assert member.producer.owned() == [1]
        wait_for(lambda: member.events[-1].assigned == {0: "10"}, 30, "source partition 0 taken back")
        assert member.events[-1].assignment == {0: "10", 1: "10"}
        assert member.producer.owned() == [0, 1]
        copy(member, 0, 10, 20)
        copy(member, 1, 10, 20)
        verdict = verify_sources(kafka.bootstrap, member.topic, {0: 20, 1: 20})
        assert verdict.ok and verdict.records == 40, verdict.summary() + "; " + "; ".join(verdict.examples)
    finally:
        member.producer.close()


def test_a_partition_that_keeps_failing_is_taken_back_later_each_time_until_a_unit_commits(
    kafka: KafkaHandle, kube: Kube, pods: PodSet, log_topics: tuple[str, str]
) -> None:
    """No hot loop: each failure in a row doubles the wait before the member takes the partition
    back (the ``lost`` event's ``retaking`` and the error say it); a committed unit starts again
    from a second."""
    pods.start("member", [sys.executable, "-c", "import time; time.sleep(600)"])
    member = Member(kafka, kube, *log_topics, exactly_once=True)
    try:
        member.assign(0)
        member.commit(0, "1")

        def fail_once(wait: str) -> None:
            tx = member.producer.transaction(0)
            tx.produce(member.topic, b"doomed", b"k")
            fencer = Producer(kafka.config(transactional_id=transactional_id(kube.namespace, "g", 0)))
            fencer.init_transactions(30)
            with pytest.raises(ProducerFencedError, match=f"takes it back in {wait}s"):
                tx.commit("never")
            assert member.events[-1].retaking == {0: float(wait)}
            wait_for(lambda: member.events[-1].assigned == {0: "1"}, 30, "source partition 0 taken back")

        fail_once("1")
        fail_once("2")  # no commit since: the second failure in a row
        member.commit(0, "1")
        fail_once("1")
        assert member.committed(member.topic) == [b"x", b"x"], "no failed unit is visible"
    finally:
        member.producer.close()


def test_a_member_that_cannot_renew_its_lease_loses_everything_and_takes_it_again(
    kafka: KafkaHandle, kube: Kube, kube_server: KubeApiServer, pods: PodSet, log_topics: tuple[str, str]
) -> None:
    pods.start("member", [sys.executable, "-c", "import time; time.sleep(600)"])
    with FaultProxy(kube_server) as proxy:  # the member talks to the API server through it
        import kubernetes

        config: Any = kubernetes.config
        member = Member(
            kafka, kube, *log_topics, exactly_once=True,
            api_client=config.new_client_from_config(str(proxy.kubeconfig_path)),
        )  # fmt: skip
        try:
            member.assign(0, 1)
            member.commit(0, "c0")
            away = proxy.faults.add(verb="update", resource="leases", namespace=kube.namespace, count=-1)
            wait_for(lambda: member.events[-1].lost == [0, 1], 20, "the lost event (5 s session)")
            assert member.events[-1].assignment == {}
            assert away.hits >= 2 and not member.producer.alive()
            with pytest.raises(NotOwnedError):
                member.producer.transaction(0)
            proxy.faults.clear()
            # the Lease is renewed again and the annotation still names both partitions: it takes
            # them again, with their checkpoints
            wait_for(lambda: member.events[-1].assigned == {0: "c0", 1: None}, 20, "the partitions again")
            assert member.events[-1].assignment == {0: "c0", 1: None}
            assert member.producer.alive()
            member.commit(1, "c1")
        finally:
            member.producer.close()


def test_a_settings_change_restarts_the_members_partitions_under_the_new_settings(member: Member) -> None:
    """exactlyOnce flipped under a member that owns partitions (the CRD refuses it; an older CRD
    may not): it hands them back to itself and takes them again under the new mode, instead of
    failing on every attempt to apply the assignment and never acknowledging it."""
    member.assign(0)
    member.commit(0, "1", b"before")
    flipped = member.settings.model_copy(update={"exactly_once": not member.settings.exactly_once})
    member.assign(0, settings=flipped)
    wait_for(lambda: member.acked() == 2, 10, "the acknowledgement of generation 2")
    handed_back, taken_again = member.events[-2:]
    assert (handed_back.generation, handed_back.revoked, handed_back.assignment) == (2, [0], {})
    assert (taken_again.generation, taken_again.assigned, taken_again.assignment) == (2, {0: "1"}, {0: "1"})
    member.commit(0, "2", b"after")
    assert member.committed(member.topic) == [b"before", b"after"]


def test_a_member_idle_past_its_limit_gives_its_partitions_up_and_alive_brings_it_back(
    member: Member,
) -> None:
    """No alive() and no committed unit for maxIdleSeconds: the member steps out (its Lease names no
    holder, so the operator moves the partitions at once), its open unit cannot commit any more,
    and the application hears ``lost``. alive() brings it back."""
    idle = member.settings.model_copy(update={"max_idle_seconds": 4})  # time to open the unit below
    member.assign(0, 1, settings=idle)
    hanging = member.producer.transaction(0)
    hanging.produce(member.topic, b"late", b"k")  # then the copy loop hangs
    wait_for(lambda: member.events[-1].lost == [0, 1], 15, "the lost event")
    assert member.events[-1].assignment == {}
    assert member.holder() is None, "the Lease names no holder: the operator moves the partitions"
    with pytest.raises(NotOwnedError, match="maxIdleSeconds"):
        hanging.commit("late")
    if member.settings.exactly_once:
        assert member.committed(member.topic) == [], "the hung unit was aborted"
    written = [json.loads(v) for v in member.committed(member.settings.checkpoint_topic)]
    assert [c for c in written if not c.get("takeover")] == [], "no checkpoint of the hung unit"

    # the default limit again (taken while out; it takes nothing until alive()): back in, the
    # member does not step out before its unit below, however long the steps take
    member.assign(0, 1)
    assert member.events[-1].assignment == {}
    assert member.producer.alive() is False, "it was out; this call brings it back"
    wait_for(lambda: member.holder() == "member", 10, "the Lease held again")
    wait_for(lambda: member.events[-1].assigned == {0: None, 1: None}, 20, "the partitions again")
    assert member.producer.alive()
    member.commit(0, "1")
