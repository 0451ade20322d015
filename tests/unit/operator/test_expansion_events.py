"""Which retries the operator announces with an Event: every new cause, never the same one twice."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import kopf
import pytest

from ordo.api import ExpansionPhase, OrderedTopicExpansion, OrderedTopicExpansionStatus
from ordo.epochs import EpochHistory
from ordo.epochs.liveness import ProducerReport
from ordo_operator import expansions, kube
from ordo_operator.config import OperatorConfig
from ordo_operator.kafka import KafkaSide

RESOURCE = OrderedTopicExpansion.model_validate(
    {
        "apiVersion": "ordo.dev/v1alpha1",
        "kind": "OrderedTopicExpansion",
        "metadata": {"name": "grow", "namespace": "ns", "generation": 1},
        "spec": {"topic": "orders", "partitions": 8},
    }
)


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    """The Events the handler code posts (type, reason, message); status patches go nowhere."""
    posted: list[tuple[str, str, str]] = []

    def event(_body: Any, *, type: str, reason: str, message: str) -> None:
        posted.append((type, reason, message))

    monkeypatch.setattr(kopf, "event", event)
    monkeypatch.setattr(expansions, "patch_status", lambda *_args: None)
    return posted


def _driver() -> expansions._ExpansionDriver:
    """A driver fencing epoch 1 whose last step was Fencing (no Kafka: a retry does not use it)."""
    status = OrderedTopicExpansionStatus(
        phase=ExpansionPhase.FENCING, epoch=1, from_partitions=4, to_partitions=8, message="fencing"
    )
    resource = RESOURCE.model_copy(update={"status": status})
    body = cast(kopf.Body, {})
    driver = expansions._ExpansionDriver(
        OperatorConfig(), "ns", "grow", body, {}, resource, cast(KafkaSide, None)
    )
    driver.last_reason = "Fencing"
    return driver


def test_a_new_cause_while_already_retrying_gets_its_own_warning(events: list[tuple[str, str, str]]) -> None:
    driver = _driver()
    driver._retry("reading Kafka", TimeoutError("metadata timed out"))
    assert driver.last_reason == "Retrying"
    driver._retry("append-fence", RuntimeError("epoch log unreachable"))
    assert [(kind, reason) for kind, reason, _ in events] == [("Warning", "Retrying")] * 2
    assert "reading Kafka failed: metadata timed out" in events[0][2]
    assert "append-fence failed: epoch log unreachable" in events[1][2]
    assert driver.status.message == events[1][2], "status says the latest cause"
    assert driver.status.phase == ExpansionPhase.FENCING and driver.status.epoch == 1


def test_the_same_cause_again_is_not_announced_again(events: list[tuple[str, str, str]]) -> None:
    driver = _driver()
    for _ in range(3):
        driver._retry("append-fence", RuntimeError("epoch log unreachable"))
    assert len(events) == 1


def test_failed_passes_wait_longer_each_time_up_to_a_cap_and_a_success_starts_over(
    events: list[tuple[str, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka away: the waits grow 2, 4, 8, 16, 30, 30 s (controller-runtime's and kopf's way), and
    a pass that gets through makes the next failure wait 2 s again."""
    driver = _driver()
    outcomes = iter([*(["fail"] * 6), "ok", "fail"])

    def one_pass(_index: object) -> expansions._Wait:
        if next(outcomes) == "fail":
            driver._retry("reading Kafka", TimeoutError("metadata timed out"))
            return expansions._Wait(expansions.RETRY_SECONDS)
        return expansions._Wait(0.2, on_registry=True)

    monkeypatch.setattr(driver, "_step", one_pass)
    index = cast(kopf.Index[str, tuple[str, str, str, str]], {})
    waits = [driver.step(index) for _ in range(8)]
    assert [w.seconds for w in waits if w is not None] == [2, 4, 8, 16, 30, 30, 0.2, 2]
    assert waits[6] == expansions._Wait(0.2, on_registry=True), "a pass that succeeds waits as it says"
    assert len(events) == 1, "the same cause is announced once"


def test_a_deleted_expansion_whose_connection_cannot_be_resolved_keeps_its_finalizer(
    events: list[tuple[str, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its Secret is gone and the operator holds no clients for its cluster: the delete raises
    kopf.TemporaryError (the finalizer stays) with a growing delay, one UndoBlocked Warning per
    cause, naming what to do; it is released only when annotated so."""
    monkeypatch.setattr(kube, "_secret_data", lambda _name, _namespace: None)  # deleted
    monkeypatch.setattr(expansions, "known_sides", list)
    monkeypatch.setattr(expansions, "namespace_terminating", lambda _namespace: False)
    posted: list[str] = []
    monkeypatch.setattr(expansions, "post_operator_event", lambda reason, *_: posted.append(reason))
    body = _fencing_with_secret()
    delays = []
    for retry in range(3):
        with pytest.raises(kopf.TemporaryError) as raised:
            expansions._undo(OperatorConfig(), "ns", "grow", body, retry)
        delays.append(raised.value.delay)
    assert delays == [2, 4, 8]
    assert [(kind, reason) for kind, reason, _ in events] == [("Warning", "UndoBlocked")]
    said = events[0][2]
    assert "Secret 'kafka-user' not found" in said and "epoch 1 of 'orders' stays fencing" in said
    assert "ordo abort-fence --topic orders --epoch 1 --bootstrap kafka:9092" in said
    assert "ordo.dev/skip-undo=true" in said
    annotated = _fencing_with_secret({"ordo.dev/skip-undo": "true"})
    expansions._undo(OperatorConfig(), "ns", "grow", annotated, 3)  # released: no exception
    assert posted == ["FenceLeftFencing"] and events[-1][1] == "FenceLeftFencing"


def test_an_expansion_that_never_fenced_is_released_without_its_connection(
    events: list[tuple[str, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(expansions, "known_sides", list)
    for phase in (ExpansionPhase.PENDING, ExpansionPhase.CREATING, ExpansionPhase.COMPLETED):
        expansions._undo(OperatorConfig(), "ns", "grow", _fencing_with_secret(phase=phase), 0)


def _fencing_with_secret(
    annotations: dict[str, str] | None = None, phase: ExpansionPhase = ExpansionPhase.FENCING
) -> kopf.Body:
    """An expansion fencing epoch 1 whose connection reads a Secret that is gone."""
    status = OrderedTopicExpansionStatus(phase=phase, epoch=1, from_partitions=4, to_partitions=8)
    resource = RESOURCE.model_copy(update={"status": status})
    body = resource.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["metadata"]["annotations"] = annotations or {}
    body["spec"]["kafka"] = {"bootstrapServers": "kafka:9092", "secretRef": {"name": "kafka-user"}}
    return cast(kopf.Body, body)


class _Side:
    """Kafka as the shell sees it, every call logged: the topic has its 8 partitions (created before
    the fence), epoch 1 fences 4 -> 8 in the log, and the one producer acknowledged it."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.history = EpochHistory.initial("orders", 4).begin_fence(8)
        self.epochs = SimpleNamespace(history=lambda _topic: self.history)
        self.registry = SimpleNamespace(silent=lambda _topic, _epoch: {})

    def live_producers(self, topic: str) -> dict[str, ProducerReport]:
        self.calls.append("registry")
        acked = ProducerReport(
            producer_id="p1", topics=(topic,), fenced={topic: 1}, session_timeout_ms=10_000, reported_at_ms=0
        )
        return {"p1": acked}

    def partition_count(self, _topic: str) -> int:
        self.calls.append("metadata")
        return 8

    def stragglers(self, _topic: str, _epoch: int) -> dict[str, float]:
        return {}

    def end_offsets(self, _topic: str, partitions: int) -> dict[int, int]:
        self.calls.append("thresholds")
        return {p: 100 + p for p in range(partitions)}

    def write_history(self, history: EpochHistory) -> None:
        self.calls.append(f"epoch log: {history.current.state}")
        self.history = history


def test_the_pass_that_sees_the_last_acknowledgement_publishes_with_no_status_write_before(
    events: list[tuple[str, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43: nothing but Kafka between the last acknowledgement and the publish; the status
    says Completed after, with the thresholds the epoch log holds."""
    calls: list[str] = []
    written: list[OrderedTopicExpansionStatus] = []

    def patch(_plural: str, _namespace: str, _name: str, status: OrderedTopicExpansionStatus) -> None:
        calls.append(f"status: {status.phase}")
        written.append(status)

    monkeypatch.setattr(expansions, "patch_status", patch)
    driver = _driver()
    driver.side = cast(KafkaSide, _Side(calls))
    index = cast(kopf.Index[str, tuple[str, str, str, str]], {})
    assert driver._step(index) == expansions._Wait(0.0)  # the fencing pass: fenced, published
    assert calls == ["registry", "metadata", "thresholds", "epoch log: active"]
    assert [reason for _, reason, _ in events] == ["Fenced"]
    assert driver._step(index) is None  # the next pass finds the epoch active: Completed
    assert calls[-1] == "status: Completed" and "status: Fencing" not in calls
    assert written[-1].thresholds == {str(p): 100 + p for p in range(4)}
    assert written[-1].fence_wait_seconds is not None
    assert [reason for _, reason, _ in events] == ["Fenced", "Completed"]
