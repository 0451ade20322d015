"""ordo's control topics on three brokers: created as durable as the cluster allows, and a weaker
one said by the operator (issue 42 item 3; the verdict's cases: tests/unit/operator/test_topic_plan.py).
Runs on the testbed's replicated cluster, which `make test` starts for its own tests anyway."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import NewTopic
from prometheus_client import REGISTRY

from ordo.epochs.log import ensure_log_topics
from ordo_operator.config import OperatorConfig
from ordo_operator.kafka import KafkaSide
from ordo_operator.topics import TopicWatch, control_topic_views
from ordo_testbed.kafka.fixtures import KafkaHandle

pytestmark = [pytest.mark.testbed, pytest.mark.slow]


def test_weak_control_topics_are_said_and_ordos_own_are_created_durable(
    replicated_kafka: KafkaHandle, caplog: pytest.LogCaptureFixture
) -> None:
    kafka = replicated_kafka
    weak, registry = kafka.topic("epochs"), kafka.topic("producers")
    # created beforehand by someone else, on one broker; the cluster defaults to 3 and 2
    created = kafka.admin.create_topics(
        [NewTopic(weak, 1, 1, config={"cleanup.policy": "compact", "min.insync.replicas": "1"})]
    )
    created[weak].result(30)
    ensure_log_topics(kafka.admin, weak, registry)  # leaves the existing one, creates the registry
    brokers, views = control_topic_views(kafka.admin, [weak, registry], 15)
    assert brokers == 3
    assert {(v.topic, v.replication, v.min_insync) for v in views} == {(weak, 1, 1), (registry, 3, 2)}
    settings = OperatorConfig(epoch_topic=weak, registry_topic=registry)
    side = KafkaSide(kafka.config(), settings)
    try:
        with caplog.at_level("WARNING", logger="ordo_operator.topics"):
            TopicWatch(settings, lambda _topic: False).check_control_topics(side)
    finally:
        side.close()
    said = [r.getMessage() for r in caplog.records]
    assert any(
        f"{weak!r} has replication factor 1 on a cluster of 3 brokers: raise it to 3" in m for m in said
    )
    assert any(f"{weak!r} has min.insync.replicas=1: set it to 2" in m for m in said), said
    assert not any(registry in m for m in said)

    def gauge(topic: str, setting: str) -> float | None:
        labels = {"topic": topic, "setting": setting}
        return REGISTRY.get_sample_value("ordo_control_topic_below_recommended", labels)

    assert gauge(weak, "replication.factor") == 1 and gauge(weak, "min.insync.replicas") == 1
    assert gauge(registry, "replication.factor") == 0 and gauge(registry, "min.insync.replicas") == 0
    # the cluster is the session's: a single-replica partition left on it would never find a new
    # leader when a later test kills its broker (test_failover_reads waits for every partition's)
    kafka.admin.delete_topics([weak])[weak].result(30)
