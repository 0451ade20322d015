"""``ordo status`` shows TopicAutoscalers: the count, what load needs, the last decision, and a
condition such as BelowCapacity next to the message."""

from __future__ import annotations

from rich.console import Console

from ordo.api import TopicAutoscaler
from ordo.cli.status import render

AUTOSCALER = {
    "apiVersion": "ordo.dev/v1alpha1",
    "kind": "TopicAutoscaler",
    "metadata": {"name": "orders", "namespace": "shop"},
    "spec": {
        "topic": "orders",
        "minPartitions": 2,
        "maxPartitions": 16,
        "targets": {"recordsPerSecondPerPartition": 50},
    },
    "status": {
        "currentPartitions": 8,
        "desiredPartitions": 8,
        "load": {
            "recordsPerSecondPerPartition": 12.5,
            "bytesPerSecondPerPartition": 900,
            "recordsPerOffset": 0.9,
            "measuredAt": "2026-11-28T21:00:00Z",
        },
        "lastDecision": {
            "time": "2026-11-28T20:50:00Z",
            "fromPartitions": 4,
            "toPartitions": 8,
            "reason": "300.0 records/s needs 6 partition(s)",
            "expansion": "orders-8",
        },
        "message": "100.0 records/s needs 2 partition(s); the topic has 8",
        "conditions": [
            {
                "type": "BelowCapacity",
                "status": "True",
                "reason": "BelowCapacity",
                "lastTransitionTime": "2026-11-28T21:00:00Z",
            },
            {
                "type": "Ready",
                "status": "True",
                "reason": "Measuring",
                "lastTransitionTime": "2026-11-28T20:40:00Z",
            },
        ],
    },
}


def test_status_shows_autoscalers_with_their_last_decision() -> None:
    console = Console(width=250, record=True)
    autoscaler = TopicAutoscaler.model_validate(AUTOSCALER)
    console.print(render({"groups": [], "expansions": [], "autoscalers": [autoscaler], "topics": None}))
    text = console.export_text()
    assert "TopicAutoscalers" in text and "shop/orders" in text
    assert "8 (desired 8, 2-16)" in text and "12.5" in text and "4 → 8 (orders-8)" in text
    assert "BelowCapacity 100.0 records/s needs 2 partition(s)" in text


def test_status_without_autoscalers_adds_no_table() -> None:
    console = Console(width=200, record=True)
    console.print(render({"groups": [], "expansions": [], "autoscalers": [], "topics": None}))
    assert "TopicAutoscalers" not in console.export_text()
