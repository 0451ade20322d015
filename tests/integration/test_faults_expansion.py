"""Kafka failing at each step of an expansion, with producers and a gated consumer running: the
epoch log refusing writes or unreachable, the thresholds unreadable, and a CreatePartitions that
timed out at the operator although the broker did it. Each ends Completed with one new epoch, no
key reordered, and an Event that says what happened (a Warning ``Retrying``, or ``TookEffect``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ordo.epochs.log import read_history
from ordo_sandbox.scenario.workload import Workload
from ordo_testbed.kafka import Fault
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions
from ordo_testbed.waiting import wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

REFUSED = "TOPIC_AUTHORIZATION_FAILED"  # not retriable: the client gives up and the operator sees it
# what fails -> (the fault for it, [(an Event reason that says so, words of its message), ...])
FaultFor = Callable[[str, str], Fault]  # (topic, epoch log topic) -> the fault
CASES: dict[str, tuple[FaultFor, list[tuple[str, str]]]] = {
    "epoch-log-refuses-writes": (
        lambda topic, epochs: Fault(api="Produce", topic=epochs, error=REFUSED, count=1),
        [("Retrying", "append-fence failed")],
    ),
    "epoch-log-unreachable": (
        # no duration: unreachable until the operator has said so (a window timed from when the
        # fault is added may close before the operator's first write, which then simply succeeds)
        lambda topic, epochs: Fault(api="Produce", topic=epochs, drop=True),
        [("Retrying", "append-fence failed")],
    ),
    "thresholds-unreadable": (
        # partition 0: the wait for served partitions before the fence asks only the new ones
        lambda topic, epochs: Fault(api="ListOffsets", topic=topic, partition=0, error=REFUSED, count=1),
        [("Retrying", "read-thresholds failed")],
    ),
    "create-partitions-answered-late": (
        lambda topic, epochs: Fault(api="CreatePartitions", topic=topic, late=4.0, count=1),
        # The operator re-reads the partition count after the timeout; on the admin client's
        # connection that read may queue behind the late answer (as on Kafka), then the pass is
        # retried and finds the partitions there.
        [("TookEffect", "but took effect"), ("Retrying", "create-partitions failed")],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_failing_step_is_reported_retried_and_the_expansion_completes(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
    tmp_path: Path,
    case: str,
) -> None:
    fault_for, reports = CASES[case]
    epochs, registry = log_topics
    topic = kafka.create_topic(4)
    operator = operator_process(ORDO_KAFKA_TIMEOUT_SECONDS="2").start()
    workload = Workload(
        kafka.bootstrap, topic, tmp_path / "work", producers=2, consumers=1, keys=200, rate=200,
        epoch_topic=epochs, registry_topic=registry,
    ).start()  # fmt: skip
    expansions = Expansions(kube.custom, kube.namespace)
    try:
        wait_for(lambda: workload.processed_count() > 200, 30, "traffic before the expansion")
        fault = kafka.faults.add(fault_for(topic, epochs))
        expansions.create("grow", topic, 6, fenceTimeoutSeconds=30)
        wait_for(
            lambda: any(words in (e.message or "") for reason, words in reports for e in kube.events(reason)),
            60,
            f"an Event saying what happened, one of {reports}",
        )
        assert fault.hits >= 1, "the fault was hit"
        kafka.faults.remove(fault.id)  # Kafka recovers; count-limited faults are spent already
        status = expansions.wait_phase("grow", "Completed", 60)
        assert (status["fromPartitions"], status["toPartitions"], status["epoch"]) == (4, 6, 1)
        workload.finish_producing(60)
    finally:
        operator.stop()
        verdict = workload.stop()
    assert verdict.ok, verdict.summary() + str(verdict.examples)
    history = read_history(kafka.config(), epochs, topic)
    assert [e.epoch for e in history.epochs] == [0, 1] and history.active.partitions == 6
