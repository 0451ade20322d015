"""Which retries the operator announces with an Event: every new cause, never the same one twice."""

from __future__ import annotations

from typing import Any, cast

import kopf
import pytest

from ordo.api import ExpansionPhase, OrderedTopicExpansion, OrderedTopicExpansionStatus
from ordo_operator import expansions
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
