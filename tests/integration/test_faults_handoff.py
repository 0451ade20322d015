"""Faults at every step of a ProducerGroup handoff: the operator killed before and after each of
its two steps' writes (revoke from the old owner, grant to the new one) and after their status,
and the Kubernetes API failing the writes (500, 409, a timeout). Each ends with the partitions
split, every record copied exactly once, and a condition/Event that says what happened."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from ordo_sandbox.scenario.sources import verify_sources
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.faults import FaultProxy
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.pods import Pod, PodSet
from ordo_testbed.resources import Groups, group_member_argv
from ordo_testbed.soak import soak_params
from ordo_testbed.waiting import wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.slow]
GROUP, LABELS, RECORDS = "handoff", {"app": "handoff"}, 150


@dataclass
class Handoff:
    kafka: KafkaHandle
    kube: Kube
    pods: PodSet
    operator: OperatorProcess
    epochs: str
    registry: str
    topic: str
    groups: Groups

    def member(self, name: str) -> Pod:
        argv = group_member_argv(
            self.kafka.bootstrap,
            self.topic,
            records=RECORDS,
            batch=5,
            rate=10,
            epoch_topic=self.epochs,
            registry_topic=self.registry,
        )
        return self.pods.start(name, argv, labels=LABELS, env={"ORDO_GROUP": GROUP}, grace=10)

    def checkpoints(self) -> dict[int, str | None]:
        return self.groups.checkpoints(GROUP)

    def events(self) -> list[str]:
        return self.kube.event_reasons()

    def finish(self) -> None:
        """Both members own two partitions each, the copy completes, exactly once."""
        status = self.groups.wait_settled(GROUP, 2, 90, 4)
        assert sorted(len(m["partitions"]) for m in status["members"]) == [2, 2]
        ready = [c for c in status["conditions"] if c["type"] == "Ready"]
        assert ready[0]["status"] == "True" and ready[0]["reason"] == "Assigned"
        wait_for(lambda: self.checkpoints() == dict.fromkeys(range(4), str(RECORDS)), 120, "the copy")
        verdict = verify_sources(self.kafka.bootstrap, self.topic, dict.fromkeys(range(4), RECORDS))
        assert verdict.ok, verdict.summary()
        wait_for(lambda: "Rebalanced" in self.events(), 15, "a Rebalanced event")


@pytest.fixture
def handoff(
    kafka: KafkaHandle,
    kube: Kube,
    pods: PodSet,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
) -> Iterator[Handoff]:
    operator = operator_process().start()
    topic = kafka.create_topic(2, prefix="data")
    run = Handoff(kafka, kube, pods, operator, *log_topics, topic, Groups(kube.custom, kube.namespace))
    run.groups.create(GROUP, 4, LABELS, sessionTimeoutSeconds=5, checkpointTopic=kafka.topic("checkpoints"))
    run.member("m-0")
    run.groups.wait_settled(GROUP, 1, 60, 4)
    try:
        yield run
    finally:
        operator.stop()
        print(operator.log_text()[-3000:])


# revoke: m-0 gives up two partitions; grant: m-1 receives them once m-0 acknowledged.
CI_POINTS = ("after-status:revoke", "after:grant")
CRASH_POINTS = [
    f"{when}:{step}" for step in ("revoke", "grant") for when in ("before", "after", "after-status")
]


@pytest.mark.parametrize("crash_at", soak_params(CRASH_POINTS, CI_POINTS))
def test_operator_killed_at_a_handoff_step_resumes_and_completes_it(handoff: Handoff, crash_at: str) -> None:
    handoff.operator.kill()
    handoff.operator.env["ORDO_TEST_CRASH_AT"] = crash_at
    handoff.operator.start()
    handoff.member("m-1")
    wait_for(lambda: not handoff.operator.running, 60, f"the operator to crash at {crash_at}")
    assert f"test crash point {crash_at} reached" in handoff.operator.log_text()
    del handoff.operator.env["ORDO_TEST_CRASH_AT"]
    handoff.operator.start()
    handoff.finish()
    if crash_at.startswith("after-status"):  # status showed the rebalance in flight: the restart says so
        wait_for(lambda: "Resumed" in handoff.events(), 15, "a Resumed event")


@pytest.mark.parametrize(
    "code",
    soak_params([500, 409, 0], in_ci=[500]),
    ids=["500", "409", "slow"],
)
def test_kubernetes_api_failing_the_assignment_writes_is_retried(handoff: Handoff, code: int) -> None:
    server = handoff.kube.server
    if server is None:
        pytest.skip("the fault proxy stands in front of the testbed's API server")
    with FaultProxy(server) as proxy:  # the operator talks to the API server through it from now on
        handoff.operator.kubeconfig = proxy.kubeconfig_path
        handoff.operator.restart()
        # 409/500 answer at once; code 0 answers after 5 s (the operator sets no client timeout)
        spec = {"delay": 5.0, "code": 0} if code == 0 else {"code": code}
        fault = proxy.faults.add(
            verb="patch", resource="pods", namespace=handoff.kube.namespace, count=3, **spec
        )
        handoff.member("m-1")
        handoff.finish()
        assert fault.hits >= 1, "the writes met the fault"
        handoff.operator.stop()
