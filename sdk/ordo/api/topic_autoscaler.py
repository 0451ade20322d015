"""The TopicAutoscaler resource: grow a topic's partitions by itself when load demands it, each step
an OrderedTopicExpansion (so no key is reordered). It only grows: a topic cannot shrink in place."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from .common import (
    TOPIC_PATTERN,
    Condition,
    CrdInfo,
    Model,
    PrinterColumn,
    Resource,
    Validation,
)
from .kafka import KafkaConnection, KafkaTopicRef
from .topic_expansion import MAX_PARTITIONS, Timestamp

__all__ = [
    "ConsumerGroupTarget",
    "Growth",
    "MeasuredLoad",
    "ScalingDecision",
    "ScalingTargets",
    "TopicAutoscaler",
    "TopicAutoscalerSpec",
    "TopicAutoscalerStatus",
]

# Each rule once, for the API server (CEL) and for the model (the SDK and the operator).
MIN_NOT_ABOVE_MAX = Validation(
    rule="!has(self.spec.minPartitions) || self.spec.minPartitions <= self.spec.maxPartitions",
    message="minPartitions must not be larger than maxPartitions",
)
SOME_TARGET = Validation(
    rule="has(self.recordsPerSecondPerPartition) || has(self.bytesPerSecondPerPartition) || "
    "(has(self.consumerGroups) && size(self.consumerGroups) > 0)",
    message="give at least one target: recordsPerSecondPerPartition, bytesPerSecondPerPartition "
    "or consumerGroups [{name, lagPerPartition}]",
)


class Growth(StrEnum):
    """How the next partition count is chosen once load needs ``desired`` partitions."""

    DOUBLE = "double"
    """The current count times the smallest power of two that reaches ``desired``: every new
    partition's prior set (the old partitions its keys may come from) is one partition."""
    FEWEST_PRIORS = "fewestPriors"
    """The smallest count >= ``desired`` (and <= max) whose prior sets are smallest: a multiple of
    the current count when one fits (prior sets of one partition), else the best count below max."""


class ConsumerGroupTarget(Model):
    """A consumer group whose lag on the topic is a target."""

    name: str = Field(min_length=1, max_length=255, description="The consumer group's id.")
    lag_per_partition: int = Field(
        ge=1,
        description="Committed-offset lag (in offsets) per partition the topic should not exceed: "
        "the group's total lag divided by this is the partitions needed.",
    )


class ScalingTargets(Model):
    """Load one partition should carry; the strictest target decides the count."""

    records_per_second_per_partition: float | None = Field(
        default=None, gt=0, description="Records per second one partition should carry at most."
    )
    bytes_per_second_per_partition: float | None = Field(
        default=None, gt=0, description="Key and value bytes per second one partition should carry at most."
    )
    consumer_groups: list[ConsumerGroupTarget] = Field(
        default_factory=list, description="Consumer groups whose lag per partition is a target."
    )

    @model_validator(mode="after")
    def _some_target(self) -> ScalingTargets:
        if (
            self.records_per_second_per_partition is None
            and self.bytes_per_second_per_partition is None
            and not self.consumer_groups
        ):
            raise ValueError(SOME_TARGET.message)
        return self


class TopicAutoscalerSpec(Model):
    """Bounds, targets and pace of a topic's automatic growth."""

    topic: str = Field(pattern=TOPIC_PATTERN, description="The topic to grow.")
    kafka: KafkaConnection | None = Field(
        default=None, description="Kafka connection; the operator's default when absent."
    )
    min_partitions: int = Field(
        default=1,
        ge=1,
        le=MAX_PARTITIONS,
        description="The topic grows to this at once if it has fewer partitions.",
    )
    max_partitions: int = Field(ge=2, le=MAX_PARTITIONS, description="The topic never grows beyond this.")
    targets: ScalingTargets = Field(
        description="Load per partition; at least one of recordsPerSecondPerPartition, "
        "bytesPerSecondPerPartition, consumerGroups.",
        json_schema_extra={"x-kubernetes-validations": [SOME_TARGET.as_schema()]},
    )
    growth: Growth = Field(
        default=Growth.DOUBLE,
        description="double (default: each new partition's keys come from one old partition) or "
        "fewestPriors (the smallest count that carries the load with the smallest prior sets).",
    )
    stabilization_window_seconds: int = Field(
        default=60,
        ge=0,
        le=3600,
        description="Load must need more partitions through this whole window before the topic grows "
        "(the window's least need decides, as HorizontalPodAutoscaler's scale-up stabilization).",
    )
    cooldown_seconds: int = Field(
        default=120,
        ge=0,
        le=86_400,
        description="No growth for this long after any expansion of the topic ended (its own end "
        "time, from its status).",
    )
    measure_interval_seconds: float = Field(
        default=5.0, ge=0.5, le=300, description="How often the operator measures the topic's load."
    )
    fence_timeout_seconds: int = Field(
        default=60, ge=1, le=3600, description="fenceTimeoutSeconds of the expansions it creates."
    )
    kafka_topic_ref: KafkaTopicRef | None = Field(
        default=None,
        description="The Strimzi KafkaTopic of the topic, passed to the expansions it creates "
        "(their kafkaTopicRef), so Strimzi's topic operator follows the growth.",
    )

    @model_validator(mode="after")
    def _bounds(self) -> TopicAutoscalerSpec:
        if self.min_partitions > self.max_partitions:
            raise ValueError(MIN_NOT_ABOVE_MAX.message)
        return self


class MeasuredLoad(Model):
    """The topic's load as last measured from Kafka, per partition of today's count."""

    records_per_second_per_partition: float = Field(ge=0, description="Records (not offsets) per second.")
    bytes_per_second_per_partition: float = Field(ge=0, description="Key and value bytes per second.")
    lag_per_partition: dict[str, float] = Field(
        default_factory=dict, description="Each target consumer group's committed-offset lag per partition."
    )
    records_per_offset: float = Field(
        ge=0,
        le=1,
        description="Records per offset in the newest offsets sampled: transactions' commit markers "
        "take offsets but are no records.",
    )
    measured_at: Timestamp = Field(description="When (RFC 3339).")


class ScalingDecision(Model):
    """A growth the autoscaler decided."""

    time: Timestamp = Field(description="When (RFC 3339).")
    from_partitions: int = Field(ge=1, description="Partition count before.")
    to_partitions: int = Field(ge=2, description="Partition count decided.")
    reason: str = Field(description="What was measured and which target it breached.")
    expansion: str = Field(description="The OrderedTopicExpansion created for it.")


class TopicAutoscalerStatus(Model):
    """What the operator measured and decided, for people."""

    current_partitions: int | None = Field(default=None, ge=1, description="The topic's partitions now.")
    desired_partitions: int | None = Field(
        default=None,
        ge=1,
        description="Partitions the stabilization window's load needs, within min and max.",
    )
    load: MeasuredLoad | None = Field(default=None, description="The last measurement.")
    last_decision: ScalingDecision | None = Field(default=None, description="The last growth decided.")
    expansion: str | None = Field(
        default=None, description="The OrderedTopicExpansion in flight that this autoscaler created."
    )
    expansion_ended_at: Timestamp | None = Field(
        default=None,
        description="When its last expansion ended, by that expansion's own status; the cooldown "
        "counts from the latest end of any expansion of the topic.",
    )
    message: str = Field(default="", description="What happened last, for people.")
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, AtMaximum, BelowCapacity.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="Last metadata.generation handled."
    )


class TopicAutoscaler(Resource):
    """Grows a topic's partition count when load demands it, through OrderedTopicExpansions."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        kind="TopicAutoscaler",
        plural="topicautoscalers",
        singular="topicautoscaler",
        short_names=["tas"],
        printer_columns=[
            PrinterColumn(name="Topic", type="string", json_path=".spec.topic", description="The topic."),
            PrinterColumn(
                name="Current", type="integer", json_path=".status.currentPartitions",
                description="The topic's partitions now.",
            ),
            PrinterColumn(
                name="Desired", type="integer", json_path=".status.desiredPartitions",
                description="Partitions the load needs, within min and max.",
            ),
            PrinterColumn(
                name="Max", type="integer", json_path=".spec.maxPartitions", priority=1,
                description="The topic never grows beyond this.",
            ),
            PrinterColumn(
                name="Last decision", type="date", json_path=".status.lastDecision.time",
                description="When the autoscaler last decided to grow the topic.",
            ),
            PrinterColumn(
                name="Reason", type="string", json_path=".status.lastDecision.reason", priority=1,
                description="What the last decision measured.",
            ),
            PrinterColumn(
                name="Age", type="date", json_path=".metadata.creationTimestamp",
                description="Time since the autoscaler was created.",
            ),
        ],
        validations=[MIN_NOT_ABOVE_MAX],
    )  # fmt: skip
    kind: Literal["TopicAutoscaler"] = "TopicAutoscaler"
    spec: TopicAutoscalerSpec
    status: TopicAutoscalerStatus | None = None
