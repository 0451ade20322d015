"""Which retries the operator announces with an Event: every new cause, never the same one twice."""

from __future__ import annotations

from typing import Any, cast

import kopf
import pytest

from ordo.api import ExpansionPhase, OrderedTopicExpansion
from ordo_operator import expansions
from ordo_operator.plans.expansion import ExpansionState

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


def _retry(status: dict[str, Any], doing: str, error: Exception) -> str:
    state = ExpansionState(ExpansionPhase.FENCING, epoch=1, from_partitions=4, to_partitions=8)
    return expansions._retry(cast(kopf.Body, {}), "ns", "grow", status, state, RESOURCE, doing, error)


def test_a_new_cause_while_already_retrying_gets_its_own_warning(events: list[tuple[str, str, str]]) -> None:
    status: dict[str, Any] = {"phase": "Fencing", "reason": "Fencing"}
    assert _retry(status, "reading Kafka", TimeoutError("metadata timed out")) == "Retrying"
    _retry(status, "append-fence", RuntimeError("epoch log unreachable"))
    assert [(kind, reason) for kind, reason, _ in events] == [("Warning", "Retrying")] * 2
    assert "reading Kafka failed: metadata timed out" in events[0][2]
    assert "append-fence failed: epoch log unreachable" in events[1][2]
    assert status["message"] == events[1][2], "status says the latest cause"


def test_the_same_cause_again_is_not_announced_again(events: list[tuple[str, str, str]]) -> None:
    status: dict[str, Any] = {"phase": "Fencing", "reason": "Fencing"}
    for _ in range(3):
        _retry(status, "append-fence", RuntimeError("epoch log unreachable"))
    assert len(events) == 1
