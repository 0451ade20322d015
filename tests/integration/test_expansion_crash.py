"""The operator killed at every step of an expansion resumes on restart and completes it: one new
epoch, the topic grown, producers and a gated consumer running throughout with no key reordered."""

from __future__ import annotations

from pathlib import Path

import pytest

from ordo.epochs.log import ensure_log_topics, read_history
from ordo_sandbox.scenario.workload import Workload
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions
from ordo_testbed.soak import soak_params
from ordo_testbed.waiting import wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

EFFECTS = ["append-fence", "read-thresholds", "create-partitions", "publish-epoch"]
CRASH_POINTS = [f"{when}:{effect}" for effect in EFFECTS for when in ("before", "after")]
# CI: each step once, before its effect for the first two and after it for the last two
CI_POINTS = (
    "before:append-fence",
    "before:read-thresholds",
    "after:create-partitions",
    "after:publish-epoch",
)


@pytest.mark.parametrize("crash_at", soak_params(CRASH_POINTS, CI_POINTS))
def test_operator_killed_mid_expansion_resumes_and_completes(
    kafka: KafkaHandle, kube: Kube, tmp_path: Path, crash_at: str
) -> None:
    epochs, registry = kafka.topic("epochs"), kafka.topic("producers")
    ensure_log_topics(kafka.admin, epochs, registry)
    topic = kafka.create_topic(4)
    env = {"ORDO_EPOCH_TOPIC": epochs, "ORDO_REGISTRY_TOPIC": registry}
    operator = OperatorProcess(
        kube.kubeconfig_path,
        kafka.bootstrap,
        namespaces=[kube.namespace],
        env={**env, "ORDO_TEST_CRASH_AT": crash_at},
        log_path=tmp_path / "operator.log",
    )
    workload = Workload(
        kafka.bootstrap, topic, tmp_path / "work", producers=2, consumers=1, keys=200, rate=200,
        epoch_topic=epochs, registry_topic=registry,
    ).start()  # fmt: skip
    try:
        wait_for(lambda: workload.processed_count() > 200, 30, "traffic before the expansion")
        operator.start()
        Expansions(kube.custom, kube.namespace).create("grow", topic, 6, fenceTimeoutSeconds=30)
        wait_for(lambda: not operator.running, 60, f"the operator to crash at {crash_at}")
        operator.env = env
        operator.start()
        status = Expansions(kube.custom, kube.namespace).wait_phase("grow", "Completed", 60)
        assert (status["fromPartitions"], status["toPartitions"], status["epoch"]) == (4, 6, 1)
        workload.finish_producing(60)
    finally:
        operator.stop()
        verdict = workload.stop()
    assert verdict.ok, verdict.summary() + str(verdict.examples)
    assert len(kafka.admin.list_topics(timeout=10).topics[topic].partitions) == 6
    history = read_history(kafka.config(), epochs, topic)
    assert [e.epoch for e in history.epochs] == [0, 1]
    assert history.active.thresholds == {int(p): o for p, o in status["thresholds"].items()}
    assert "test crash point" in operator.log_text()
