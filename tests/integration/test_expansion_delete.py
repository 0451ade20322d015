"""Deleting an OrderedTopicExpansion in any phase undoes it, and nothing wedges.

Before ordo handled it, a deleted expansion's daemon simply stopped: the epoch log kept its epoch
fencing, the topic's producers blocked until ``ProduceBlockedError``, and the next expansion of the
topic waited on the unfinished one (measured: a healthy producer wrote 0 records in 75 s, a new
expansion stayed Pending 150 s). Now ordo's finalizer holds the resource until the operator has
aborted its epoch (before the publish: producers resume at the old count; the partitions it
created stay, in no epoch, as after a fence timeout) or found it published (it stands).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from ordo.epochs import EpochState
from ordo.epochs.liveness import ProducerLiveness
from ordo.epochs.log import read_history
from ordo_sandbox.scenario.workload import Workload
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import await_records
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions
from ordo_testbed.soak import soak_params
from ordo_testbed.waiting import wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

CRASH = "ORDO_TEST_CRASH_AT"
# the phase an expansion is in when the operator is killed at this point (test_expansion_crash.py)
PARKED_AT = {
    "Creating": "before:create-partitions",
    "Fencing": "after:append-fence",
    # every producer fenced, the thresholds about to be read and the epoch published in that pass
    "Fenced": "before:read-thresholds",
}
SHOWN = {"Fenced": "Fencing"}  # the status's phase there: the publish's pass writes none before it
CASES = [(phase, None) for phase in PARKED_AT] + [
    ("Fencing", "before:abort-on-delete"),
    ("Fencing", "after:abort-on-delete"),
]
IN_CI = [*CASES[:3], ("Fencing", "after:abort-on-delete")]


def _states(kafka: KafkaHandle, epochs: str, topic: str) -> list[tuple[int, EpochState]]:
    try:
        history = read_history(kafka.config(), epochs, topic)
    except LookupError:
        return []
    return [(e.epoch, e.state) for e in history.epochs]


def _restart(operator: OperatorProcess, crash_at: str | None = None) -> None:
    operator.env = {k: v for k, v in operator.env.items() if k != CRASH}
    if crash_at is not None:
        operator.env[CRASH] = crash_at
    operator.start()


@pytest.mark.parametrize("case", soak_params(CASES, IN_CI), ids=[f"{p}-{c or 'no-crash'}" for p, c in CASES])
def test_an_expansion_deleted_in_any_phase_is_undone_and_nothing_wedges(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
    tmp_path: Path,
    case: tuple[str, str | None],
) -> None:
    """The operator is killed with the expansion in ``phase`` (producers fenced from Fencing on),
    the resource is deleted, and the operator comes back (killed once more inside the delete
    when ``crash_in_delete``): the epoch is aborted, producers write again, and a new expansion
    of the topic completes; no key is reordered."""
    phase, crash_in_delete = case
    epochs, registry = log_topics
    topic = kafka.create_topic(4)
    workload = Workload(
        kafka.bootstrap, topic, tmp_path / "work", producers=2, consumers=1, keys=200, rate=200,
        epoch_topic=epochs, registry_topic=registry,
    ).start()  # fmt: skip
    grow = Expansions(kube.custom, kube.namespace)
    try:
        wait_for(lambda: workload.processed_count() > 200, 30, "traffic before the expansion")
        operator = operator_process(**{CRASH: PARKED_AT[phase]}).start()
        grow.create("grow", topic, 6, fenceTimeoutSeconds=60)
        wait_for(lambda: not operator.running, 60, f"the operator to stop at {PARKED_AT[phase]}")
        assert grow.status("grow")["phase"] == SHOWN.get(phase, phase)
        grow.delete("grow")
        assert grow.exists("grow"), "ordo's finalizer holds the resource until the operator undid it"
        if crash_in_delete is not None:
            _restart(operator, crash_in_delete)
            wait_for(lambda: not operator.running, 60, f"the operator to stop at {crash_in_delete}")
            assert grow.exists("grow")
        _restart(operator)
        wait_for(lambda: not grow.exists("grow"), 60, "the deleted expansion to be undone and gone")
        if phase == "Creating":  # the expansion wrote nothing; the topic watch may record epoch 0
            assert _states(kafka, epochs, topic) in ([], [(0, EpochState.ACTIVE)])
        else:
            assert _states(kafka, epochs, topic) == [(0, EpochState.ACTIVE), (1, EpochState.ABORTED)]
        said = [e.message or "" for e in kube.events("DeletedInFlight")]
        assert any(f"deleted while {SHOWN.get(phase, phase)}" in m for m in said), said
        await_records(kafka.bootstrap, topic, 4, 200, timeout=30)  # the producers write again
        grow.create("again", topic, 8, fenceTimeoutSeconds=60)
        status = grow.wait_phase("again", "Completed", 90)
        assert (status["fromPartitions"], status["toPartitions"]) == (4, 8)
        workload.finish_producing(60)
    finally:
        verdict = workload.stop()
    assert verdict.ok, verdict.summary() + str(verdict.examples)


def test_deleting_expansions_held_by_a_stalled_producer_frees_the_topic(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
    tmp_path: Path,
) -> None:
    """The issue's case, with the operator running: a producer with a 20 s session and
    fencing=lease stops answering (SIGSTOP) and holds the fence; a second expansion waits Pending
    behind the first. Deleting the pending one changes nothing else; deleting the fencing one
    aborts it: the healthy producers write again at once, and once the stalled producer is killed
    a new expansion completes (after the fence waited out what the dead producer may still have
    queued)."""
    epochs, registry = log_topics
    topic = kafka.create_topic(4)
    operator_process().start()
    workload = Workload(
        kafka.bootstrap, topic, tmp_path / "work", producers=2, consumers=1, keys=200, rate=200,
        epoch_topic=epochs, registry_topic=registry,
    ).start()  # fmt: skip
    stalled = Workload(
        kafka.bootstrap, topic, tmp_path / "stalled", producers=1, consumers=0, keys=50, rate=100,
        epoch_topic=epochs, registry_topic=registry, first_id=5,
        # fencing=lease: Kafka cannot fence it, so the fence waits for it (a broker-fenced one is
        # fenced through Kafka after the grace: test_paused_producer)
        producer_options=["--session-timeout", "20", "--delivery-timeout-ms", "6000", "--fencing", "lease"],
    ).start_producers()  # fmt: skip
    stuck = stalled.producers[0]
    grow = Expansions(kube.custom, kube.namespace)
    registry_view = ProducerLiveness(kafka.config(), registry)
    try:
        wait_for(lambda: workload.processed_count() > 200, 30, "traffic before the expansion")
        wait_for(lambda: "scenario-producer-5" in registry_view.live(topic), 30, "the stalled one to report")
        stuck.send_signal(signal.SIGSTOP)
        grow.create("grow", topic, 6, fenceTimeoutSeconds=120)
        wait_for(
            lambda: "scenario-producer-5" in grow.status("grow").get("message", ""),
            60,
            "the fence to wait for the stalled producer",
        )
        grow.create("next", topic, 8, fenceTimeoutSeconds=60)
        wait_for(lambda: "in flight" in grow.status("next").get("message", ""), 30, "the next one to wait")
        assert grow.status("next")["phase"] == "Pending"
        grow.delete("next")
        wait_for(lambda: not grow.exists("next"), 30, "the pending expansion to be gone")
        assert grow.status("grow")["phase"] == "Fencing"
        assert _states(kafka, epochs, topic) == [(0, EpochState.ACTIVE), (1, EpochState.FENCING)]
        grow.delete("grow")
        wait_for(lambda: not grow.exists("grow"), 30, "the fencing expansion to be undone and gone")
        assert _states(kafka, epochs, topic) == [(0, EpochState.ACTIVE), (1, EpochState.ABORTED)]
        await_records(kafka.bootstrap, topic, 4, 200, timeout=30)  # the producers write again
        stuck.kill()
        stuck.wait(10)
        grow.create("again", topic, 8, fenceTimeoutSeconds=60)
        status = grow.wait_phase("again", "Completed", 90)
        assert (status["fromPartitions"], status["toPartitions"]) == (4, 8)
        workload.finish_producing(60)
    finally:
        registry_view.close()
        stuck.kill()
        verdict = workload.stop()
    assert verdict.ok, verdict.summary() + str(verdict.examples)
