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
from ordo_operator.plans.topics import ControlTopicView
from ordo_operator.topics import TopicWatch, control_topic_views
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.waiting import wait_for

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
    try:
        _check_views_warnings_and_gauges(kafka, weak, registry, caplog)
    finally:
        # the cluster is the session's: a single-replica partition left on it would never find a
        # new leader when a later test kills its broker (those wait for every partition's)
        kafka.admin.delete_topics([weak])[weak].result(30)


def _check_views_warnings_and_gauges(
    kafka: KafkaHandle, weak: str, registry: str, caplog: pytest.LogCaptureFixture
) -> None:
    ensure_log_topics(kafka.admin, weak, registry)  # leaves the existing one, creates the registry

    # the registry's creation was acknowledged by the controller; the broker asked next may not
    # have its metadata yet
    def both_seen() -> tuple[int, list[ControlTopicView]] | None:
        found = control_topic_views(kafka.admin, [weak, registry], 15)
        return found if len(found[1]) == 2 else None

    seen = wait_for(both_seen, 30, "both control topics in the metadata")
    assert seen is not None
    brokers, views = seen
    assert brokers == 3
    assert {(v.topic, v.replication, v.min_insync) for v in views} == {(weak, 1, 1), (registry, 3, 2)}

    def gauge(topic: str, setting: str) -> float | None:
        labels = {"topic": topic, "setting": setting}
        return REGISTRY.get_sample_value("ordo_control_topic_below_recommended", labels)

    settings = OperatorConfig(epoch_topic=weak, registry_topic=registry)
    side = KafkaSide(kafka.config(), settings)
    watch = TopicWatch(settings, lambda _topic: False)
    try:
        with caplog.at_level("WARNING", logger="ordo_operator.topics"):
            # each check asks whichever broker librdkafka picks; wait until one has seen both
            def checked_both() -> bool:
                watch.check_control_topics(side)
                return gauge(registry, "replication.factor") is not None

            wait_for(checked_both, 30, "the operator's check to have seen both control topics")
    finally:
        side.close()
    said = [r.getMessage() for r in caplog.records]
    assert any(
        f"{weak!r} has replication factor 1 on a cluster of 3 brokers: raise it to 3" in m for m in said
    )
    assert any(f"{weak!r} has min.insync.replicas=1: set it to 2" in m for m in said), said
    assert not any(registry in m for m in said)

    assert gauge(weak, "replication.factor") == 1 and gauge(weak, "min.insync.replicas") == 1
    assert gauge(registry, "replication.factor") == 0 and gauge(registry, "min.insync.replicas") == 0
