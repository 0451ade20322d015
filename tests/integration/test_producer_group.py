"""ProducerGroup end to end: the operator (kopf) + the testbed (kube-apiserver, Kafka) + members as pods.

KIP-509's four cases, graceful leave, a zombie, and exactly-once through SIGKILLs, each checked
by the independent source verifier (read_committed) where data matters.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from ordo.group.checkpoints import CheckpointLog
from ordo.member_wire import transactional_id
from ordo_sandbox.kafka_settings import write_settings
from ordo_sandbox.scenario.sources import verify_sources
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.pods import Pod, PodSet
from ordo_testbed.resources import Groups, group_member_argv
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed
GROUP = "copy"
LABELS = {"app": "copy"}


@dataclass
class Bed:
    kafka: KafkaHandle
    kube: Kube
    pods: PodSet
    operator: OperatorProcess
    epochs: str
    registry: str
    topic: str
    groups: Groups
    members: list[Pod] = field(default_factory=list)
    checkpoint_topic: str = ""

    def group(self, partitions: int, **spec: Any) -> None:
        spec.setdefault("sessionTimeoutSeconds", 3)
        self.checkpoint_topic = spec.setdefault("checkpointTopic", self.kafka.topic("checkpoints"))
        self.groups.create(GROUP, partitions, LABELS, **spec)

    def committed_checkpoints(self) -> dict[int, str | None]:
        """The checkpoints committed to Kafka now, read from the checkpoint topic itself (the
        status mirrors them on the operator's next pass, so it may lag)."""
        log = CheckpointLog({"bootstrap.servers": self.kafka.bootstrap}, self.checkpoint_topic)
        try:
            assert log.catch_up(30), "the checkpoint topic could not be read to its end"
            return {p: c.checkpoint for p, c in log.of_group(self.kube.namespace, GROUP).items()}
        finally:
            log.close()

    def member(
        self, name: str, records: int = 200, batch: int = 10, rate: float = 20, extra: tuple[str, ...] = ()
    ) -> Pod:
        argv = group_member_argv(
            self.kafka.bootstrap,
            self.topic,
            records=records,
            batch=batch,
            rate=rate,
            epoch_topic=self.epochs,
            registry_topic=self.registry,
        ) + list(extra)
        pod = self.pods.start(name, argv, labels=LABELS, env={"ORDO_GROUP": GROUP}, grace=10)
        self.members.append(pod)
        return pod

    def owners(self) -> dict[str, list[int]]:
        return self.groups.owners(GROUP)

    def settled(self, members: int, partitions: int, timeout: float = 60) -> dict[str, Any]:
        return self.groups.wait_settled(GROUP, members, timeout, partitions)


def assigned(pod: Pod) -> dict[int, str | None]:
    """Every partition the member was given, with the checkpoint it was given with (latest)."""
    out: dict[int, str | None] = {}
    for e in pod.events("rebalance"):
        out.update({int(p): c for p, c in e["assigned"].items()})
    return out


@pytest.fixture
def bed(
    kafka: KafkaHandle,
    kube: Kube,
    pods: PodSet,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
) -> Iterator[Bed]:
    operator = operator_process().start()
    topic = kafka.create_topic(4, prefix="data")
    bed = Bed(kafka, kube, pods, operator, *log_topics, topic, Groups(kube.custom, kube.namespace))
    try:
        yield bed
    finally:
        for pod in bed.members:
            if pod.returncode is not None and pod.returncode not in (0, -9, -15, 143):
                print(f"--- {pod.name} stderr\n{pod.stderr()[-3000:]}")
        operator.stop()
        print(operator.log_text()[-3000:])


def test_the_first_member_gets_every_partition_with_no_checkpoint(bed: Bed) -> None:
    bed.group(4)
    first = bed.member("m-0", records=30)
    status = bed.settled(1, 4)
    assert bed.owners() == {"m-0": [0, 1, 2, 3]}
    assert status["standby"] == [] and status["unassigned"] == []
    wait_for(lambda: assigned(first) == dict.fromkeys(range(4)), 20, "the first rebalance event")
    wait_for(
        lambda: [c.get("checkpoint") for c in bed.groups.status(GROUP)["checkpoints"]] == ["30"] * 4,
        60,
        "every partition copied and checkpointed",
    )
    verdict = verify_sources(bed.kafka.bootstrap, bed.topic, dict.fromkeys(range(4), 30))
    assert verdict.ok and verdict.records == 120, verdict.summary()


def test_a_restarted_member_resumes_from_its_checkpoints(bed: Bed) -> None:
    bed.group(2)
    first = bed.member("m-0", records=400, rate=10)
    bed.settled(1, 2)
    wait_for(
        lambda: _checkpoints(bed) and all(int(c or 0) >= 20 for c in _checkpoints(bed).values()),
        60,
        "progress",
    )
    first.sigterm()
    first.wait(30)
    committed: dict[int, str | None] = dict(bed.committed_checkpoints())
    again = bed.member("m-0", records=400, rate=0)
    wait_for(lambda: assigned(again), 30, "the restarted member's assignment")
    assert assigned(again) == committed, "it resumes exactly where the committed checkpoints say"
    wait_for(lambda: _checkpoints(bed) == {0: "400", 1: "400"}, 90, "the copy to finish")
    verdict = verify_sources(bed.kafka.bootstrap, bed.topic, {0: 400, 1: 400})
    assert verdict.ok, verdict.summary()


def test_a_second_member_splits_the_partitions_and_a_third_stands_by(bed: Bed) -> None:
    bed.group(2)
    bed.member("m-0", records=100_000, rate=5)
    bed.settled(1, 2)
    bed.member("m-1", records=100_000, rate=5)
    bed.settled(2, 2)
    assert sorted(len(p) for p in bed.owners().values()) == [1, 1]
    bed.member("m-2", records=100_000, rate=5)
    status = bed.settled(3, 2)
    assert status["standby"] == ["m-2"] and bed.owners()["m-2"] == []
    assert sorted(p for ps in bed.owners().values() for p in ps) == [0, 1]


def test_a_member_that_stops_heartbeating_loses_its_partitions_and_is_fenced(bed: Bed) -> None:
    """KIP-509's fourth case, with a zombie: SIGSTOP keeps the pod Ready but stops its Lease; its
    partitions move; after SIGCONT its writes are fenced, so the data holds each record once."""
    bed.group(4)
    bed.member("m-0", records=300, rate=20)
    zombie = bed.member("m-1", records=300, rate=20)
    bed.settled(2, 4)
    taken = bed.owners()["m-1"]
    assert taken
    wait_for(lambda: all(int(_checkpoints(bed).get(p) or 0) >= 20 for p in taken), 60, "the zombie to write")
    zombie.pause()
    wait_for(lambda: bed.owners().get("m-0") == [0, 1, 2, 3], 30, "m-0 to take over everything")
    zombie.resume()
    wait_for(lambda: _checkpoints(bed) == dict.fromkeys(range(4), "300"), 120, "the copy to finish")
    verdict = verify_sources(bed.kafka.bootstrap, bed.topic, dict.fromkeys(range(4), 300))
    assert verdict.ok, verdict.summary() + "; " + "; ".join(verdict.examples)
    assert "m-1" in verdict.members, "the zombie did write before it was fenced"


def test_a_member_whose_copy_loop_hangs_gives_its_partitions_up_and_its_late_unit_is_refused(
    bed: Bed,
) -> None:
    """Liveness of the work, not of the process (KIP-509's alive()): the hung member's Lease thread
    goes on, yet it gives its partitions up once idle past maxIdleSeconds; the other member
    continues each from its last checkpoint, and the hung unit, committed late, is not in Kafka."""
    max_idle, session = 4, 3
    bed.group(4, maxIdleSeconds=max_idle, sessionTimeoutSeconds=session)
    steady = bed.member("m-0", records=300, rate=20)
    hung = bed.member("m-1", records=300, rate=20, extra=("--hang-at", "40", "--hang-seconds", "20"))
    settled = bed.settled(2, 4)["generation"]
    taken = bed.owners()["m-1"]
    assert taken
    wait_for(lambda: hung.events("hung"), 60, "m-1's copy loop to hang")
    hung_at = time.monotonic()
    last_committed = bed.committed_checkpoints()  # m-1 commits nothing more: its loop hangs
    wait_for(lambda: bed.owners().get("m-0") == [0, 1, 2, 3], 30, "m-0 to take everything")
    print(f"the partitions moved {time.monotonic() - hung_at:.1f}s after the hang")
    wait_for(
        lambda: any(sorted(e["lost"]) == taken for e in hung.events("rebalance")),
        30,
        "m-1 to be told it lost them",
    )
    handed = wait_for(
        lambda: next(
            (e for e in steady.events("rebalance") if e["generation"] > settled and e["assigned"]), None
        ),
        30,
        "m-0's event taking them",
    )
    assert handed is not None
    assert handed["assigned"] == {str(p): last_committed.get(p) for p in taken}, (
        "m-0 continues each taken partition from its last committed checkpoint"
    )
    wait_for(lambda: hung.events("dropped"), 60, "m-1 to wake up and be refused its late commit")
    wait_for(lambda: _checkpoints(bed) == dict.fromkeys(range(4), "300"), 120, "the copy to finish")
    verdict = verify_sources(bed.kafka.bootstrap, bed.topic, dict.fromkeys(range(4), 300))
    assert verdict.ok, verdict.summary() + "; " + "; ".join(verdict.examples)


def test_a_member_takes_back_partitions_whose_producers_failed_without_a_new_owner(
    bed: Bed, tmp_path: Path
) -> None:
    """Two units' producers become unusable while the member still owns their partitions: one
    unit hangs past its transaction timeout (the coordinator aborts it), the other partition's
    producer is fenced from outside (InitProducerId on its transactional id, as the operator
    fences a silent unit at an expansion). The member takes both back, re-does each unit from its
    checkpoint, and the source verifier finds every record exactly once."""
    bed.group(2)
    short = {"bootstrap.servers": bed.kafka.bootstrap, "transaction.timeout.ms": "2000"}
    config = write_settings(short, tmp_path / "kafka.json")
    hang = ("--hang-at", "30", "--hang-seconds", "8")  # past 2 s and the broker's 1 s abort check
    member = bed.member("m-0", records=60, rate=20, extra=("--kafka-config", str(config), *hang))
    bed.settled(1, 2)
    hung = wait_for(lambda: next(iter(member.events("hung")), None), 60, "the copy loop to hang")
    assert hung is not None
    other = 1 - hung["partition"]
    fencer = Producer({**short, "transactional.id": transactional_id(bed.kube.namespace, GROUP, other)})
    fencer.init_transactions(30)  # while the member hangs in the other partition's unit

    def dropped() -> set[int]:
        return {e["partition"] for e in member.events("dropped")}

    wait_for(lambda: dropped() >= {0, 1}, 60, "both partitions' units refused")
    assert all("takes it back" in e["why"] for e in member.events("dropped")), member.events("dropped")

    def taken(p: int) -> int:
        return sum(str(p) in e["assigned"] for e in member.events("rebalance"))

    wait_for(lambda: taken(0) >= 2 and taken(1) >= 2, 30, "both partitions taken back")
    wait_for(lambda: _checkpoints(bed) == {0: "60", 1: "60"}, 90, "the copy to finish")
    verdict = verify_sources(bed.kafka.bootstrap, bed.topic, {0: 60, 1: 60})
    assert verdict.ok and verdict.records == 120, verdict.summary() + "; " + "; ".join(verdict.examples)


def test_a_graceful_leave_moves_partitions_without_waiting_for_the_session(bed: Bed) -> None:
    bed.group(4, sessionTimeoutSeconds=60)
    bed.member("m-0", records=100_000, rate=5)
    leaving = bed.member("m-1", records=100_000, rate=5)
    bed.settled(2, 4)
    leaving.sigterm()
    # far below the 60 s session: the released Lease (and the pod turning not Ready) tell at once
    wait_for(lambda: bed.owners().get("m-0") == [0, 1, 2, 3], 15, "m-0 to own everything")
    assert leaving.wait(30) == 0


def test_exactly_once_through_repeated_sigkills(bed: Bed) -> None:
    bed.group(4)
    records = 600
    for i in range(3):
        bed.member(f"m-{i}", records=records, rate=4)
    bed.settled(3, 4)
    for kill in range(3):
        victim = next(p for p in bed.members if p.returncode is None)
        before = _copied(bed)
        try:
            wait_for(lambda: _copied(bed) > before + 60, 60, "progress")  # noqa: B023 (waited on at once)
        except AssertionError as error:
            raise AssertionError(f"{error} before kill {kill}; {_state(bed)}") from None
        victim.sigkill()
        bed.member(f"r-{kill}", records=records, rate=4)
    assert _copied(bed) < 4 * records, "the kills happened while the copy ran"
    try:
        wait_for(
            lambda: _checkpoints(bed) == dict.fromkeys(range(4), str(records)), 180, "the copy to finish"
        )
    except AssertionError as error:
        raise AssertionError(f"{error}; {_state(bed)}") from None
    verdict = verify_sources(bed.kafka.bootstrap, bed.topic, dict.fromkeys(range(4), records))
    assert verdict.ok, verdict.summary() + "; " + "; ".join(verdict.examples)


def test_a_selector_matching_nothing_is_reported(bed: Bed) -> None:
    bed.group(2)
    wait_for(lambda: _condition(bed, "Degraded") == ("True", "NoMembers"), 30, "Degraded/NoMembers")
    wait_for(lambda: "NoMembers" in _events(bed), 15, "a NoMembers event")


def test_shrinking_below_owned_partitions_is_refused_and_changes_nothing(bed: Bed) -> None:
    bed.group(4)
    member = bed.member("m-0", records=100_000, rate=5)
    bed.settled(1, 4)
    before = member.read().metadata.annotations["ordo.dev/assignment"]
    bed.groups.patch_spec(GROUP, sourcePartitions=2)
    wait_for(lambda: _condition(bed, "Degraded") == ("True", "ShrinkBlocked"), 30, "Degraded/ShrinkBlocked")
    wait_for(lambda: "ShrinkBlocked" in _events(bed), 15, "a ShrinkBlocked event")
    assert member.read().metadata.annotations["ordo.dev/assignment"] == before


def test_growing_assigns_the_new_partitions_and_deleting_revokes_everything(bed: Bed) -> None:
    bed.group(2)
    member = bed.member("m-0", records=20, rate=0)
    bed.settled(1, 2)
    bed.groups.patch_spec(GROUP, sourcePartitions=3)
    bed.settled(1, 3)
    assert bed.owners() == {"m-0": [0, 1, 2]}
    wait_for(lambda: _checkpoints(bed) == dict.fromkeys(range(3), "20"), 60, "the copy to finish")
    bed.groups.delete(GROUP)
    wait_for(
        lambda: "ordo.dev/assignment" not in (member.read().metadata.annotations or {}), 30, "the revocation"
    )
    wait_for(
        lambda: any(e.get("revoked") == [0, 1, 2] for e in member.events("rebalance")), 20, "the revoke event"
    )
    verdict = verify_sources(bed.kafka.bootstrap, bed.topic, dict.fromkeys(range(3), 20))
    assert verdict.ok, verdict.summary()


def _checkpoints(bed: Bed) -> dict[int, str | None]:
    return bed.groups.checkpoints(GROUP)


def _state(bed: Bed) -> str:
    """What a failed wait needs: checkpoints in status and in Kafka, and every pod's last words."""
    try:
        committed: object = bed.committed_checkpoints()
    except AssertionError as error:  # e.g. a transaction left open holds read_committed readers
        committed = error
    return (
        f"checkpoints {_checkpoints(bed)} (committed {committed}); "
        f"status {bed.groups.status(GROUP)}\n{bed.pods.last_words()}"
    )


def _copied(bed: Bed) -> int:
    return sum(int(c or 0) for c in _checkpoints(bed).values())


def _condition(bed: Bed, kind: str) -> tuple[str, str] | None:
    for c in bed.groups.status(GROUP).get("conditions") or []:
        if c["type"] == kind:
            return c["status"], c["reason"]
    return None


def _events(bed: Bed) -> list[str]:
    return bed.kube.event_reasons()
