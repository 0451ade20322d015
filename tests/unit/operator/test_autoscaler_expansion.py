"""The OrderedTopicExpansion a TopicAutoscaler creates: owned by it, named so a restarted operator
creates it once, with the autoscaler's connection, fence timeout and KafkaTopic."""

from __future__ import annotations

from ordo.api import OrderedTopicExpansion, TopicAutoscaler
from ordo_operator.autoscalers import expansion_body, in_flight

AUTOSCALER = TopicAutoscaler.model_validate(
    {
        "apiVersion": "ordo.dev/v1alpha1",
        "kind": "TopicAutoscaler",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "u-1"},
        "spec": {
            "topic": "orders",
            "maxPartitions": 16,
            "targets": {"bytesPerSecondPerPartition": 1e6},
            "fenceTimeoutSeconds": 30,
            "kafka": {"bootstrapServers": "kafka:9092"},
            "kafkaTopicRef": {"name": "orders-topic"},
        },
    }
)


def test_the_expansion_is_owned_by_the_autoscaler_and_carries_its_settings() -> None:
    body = expansion_body(AUTOSCALER, "orders-8", 8)
    created = OrderedTopicExpansion.model_validate(body)  # what the API server's schema takes
    assert (created.spec.topic, created.spec.partitions, created.spec.fence_timeout_seconds) == (
        "orders",
        8,
        30,
    )
    assert created.spec.kafka is not None and created.spec.kafka.bootstrap_servers == "kafka:9092"
    assert created.spec.kafka_topic_ref is not None and created.spec.kafka_topic_ref.name == "orders-topic"
    (owner,) = body["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "TopicAutoscaler",
        "orders",
        "u-1",
        True,
    )
    assert body["metadata"]["name"] == "orders-8"


def test_in_flight_is_any_expansion_of_the_topic_that_has_not_ended() -> None:
    index = {
        "orders": [("shop/a", "Completed", "t0", ""), ("other/b", "Pending", "t1", "")],
        "logs": [("shop/c", "Fencing", "t2", "")],
    }
    assert in_flight(index, "orders") == "other/b"  # type: ignore[arg-type]
    assert in_flight({"orders": [("shop/a", "Aborted", "t0", "")]}, "orders") is None  # type: ignore[arg-type]
