"""A TopicAutoscaler's daemon keeps its resolved connection and meter across intervals: a
connection's Secrets are read when the daemon starts and when ``spec.kafka`` changes, not every
measurement (``resolve_due`` decides the rest: the clock and a failed measurement)."""

from __future__ import annotations

from typing import Any

import kopf
import pytest

from ordo.api import TopicAutoscaler
from ordo_operator import autoscalers
from ordo_operator.config import OperatorConfig


def _resource(bootstrap: str) -> TopicAutoscaler:
    return TopicAutoscaler.model_validate(
        {
            "apiVersion": "ordo.dev/v1alpha1",
            "kind": "TopicAutoscaler",
            "metadata": {"name": "orders", "namespace": "shop"},
            "spec": {
                "topic": "orders",
                "maxPartitions": 8,
                "targets": {"recordsPerSecondPerPartition": 100},
                "kafka": {
                    "bootstrapServers": bootstrap,
                    "authentication": {
                        "type": "scram-sha-512",
                        "username": "u",
                        "passwordSecret": {"secretName": "kafka-user", "password": "password"},
                    },
                },
            },
        }
    )


def test_the_secrets_are_read_once_while_the_connection_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    resolved: list[str] = []
    sides: dict[str, object] = {}

    def kafka_config(connection: Any, namespace: str, settings: OperatorConfig) -> dict[str, Any]:
        resolved.append(connection.bootstrap_servers)  # stands for reading its Secrets
        return {"bootstrap.servers": connection.bootstrap_servers}

    class Meter:
        def __init__(self, side: object, topic: str, groups: Any) -> None:
            self.side = side

        def close(self) -> None:
            pass

    monkeypatch.setattr(autoscalers, "kafka_config", kafka_config)
    monkeypatch.setattr(
        autoscalers, "clients_for", lambda config, _: sides.setdefault(config["bootstrap.servers"], object())
    )
    monkeypatch.setattr(autoscalers, "LoadMeter", Meter)
    driver = autoscalers._Driver(OperatorConfig(), "shop", "orders", kopf.Body({}))
    first = driver._meter(_resource("a:9092"))
    assert all(driver._meter(_resource("a:9092")) is first for _ in range(5))
    assert resolved == ["a:9092"]
    moved = driver._meter(_resource("b:9092"))  # the spec's connection changed: read again, new clients
    assert resolved == ["a:9092", "b:9092"] and moved is not first
    assert moved.side is sides["b:9092"]
