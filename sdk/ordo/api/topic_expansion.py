"""The OrderedTopicExpansion resource (KIP-253): grow a topic without reordering any key."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, ClassVar, Literal

from pydantic import Field, PlainSerializer, WithJsonSchema

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

__all__ = [
    "ExpansionPhase",
    "OrderedTopicExpansion",
    "OrderedTopicExpansionSpec",
    "OrderedTopicExpansionStatus",
]

MAX_PARTITIONS = 100_000
Timestamp = Annotated[
    datetime,
    PlainSerializer(
        lambda t: t.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        return_type=str,
        when_used="json",
    ),
    WithJsonSchema({"type": "string"}),
]
"""A moment in status: RFC 3339 in UTC to the millisecond on the wire (``2026-01-02T03:04:05.123Z``)."""


class ExpansionPhase(StrEnum):
    PENDING = "Pending"
    CREATING = "Creating"  # partitions created and served while producers write on: no stall
    FENCING = "Fencing"
    EXPANDING = "Expanding"
    PUBLISHING = "Publishing"
    COMPLETED = "Completed"
    ABORTED = "Aborted"
    FAILED = "Failed"


class OrderedTopicExpansionSpec(Model):
    """Desired partition count of a topic."""

    topic: str = Field(pattern=TOPIC_PATTERN, description="The topic to grow.")
    partitions: int = Field(
        ge=2, le=MAX_PARTITIONS, description="Target partition count; must be larger than today's."
    )
    fence_timeout_seconds: int = Field(
        default=60,
        ge=1,
        le=3600,
        description="Producers that do not acknowledge the fence by then abort the expansion "
        "(those that can be fenced through Kafka are fenced after fenceGraceSeconds instead).",
    )
    fence_grace_seconds: float = Field(
        default=2.0,
        ge=0,
        le=3600,
        description="How long the fence waits for a live producer's acknowledgement (at most half "
        "of fenceTimeoutSeconds) before it has Kafka fence the producer: InitProducerId of its "
        "transactional id aborts its open transaction and refuses its writes, and it sends them "
        "again by the new count. Silent producers are fenced at once; producers with "
        "fencing=lease are waited for as before.",
    )
    kafka: KafkaConnection | None = Field(
        default=None, description="Kafka connection; the operator's default when absent."
    )
    kafka_topic_ref: KafkaTopicRef | None = Field(
        default=None,
        description="The Strimzi KafkaTopic of the topic: once the new partitions exist the operator "
        "raises its spec.partitions to the new count (never lowers it), so Strimzi's topic operator "
        "stays Ready; condition KafkaTopicInSync says how it went.",
    )


class OrderedTopicExpansionStatus(Model):
    """What the operator did, for people; clients read the epoch log, never this."""

    phase: ExpansionPhase = Field(default=ExpansionPhase.PENDING, description="Where the expansion stands.")
    epoch: int | None = Field(default=None, ge=0, description="The epoch this expansion creates.")
    from_partitions: int | None = Field(default=None, ge=1, description="Partition count before.")
    to_partitions: int | None = Field(default=None, ge=1, description="Partition count after.")
    thresholds: dict[str, int] = Field(
        default_factory=dict, description="End offset of every old partition at the fence."
    )
    fence_wait_seconds: float | None = Field(default=None, ge=0, description="Time producers took to fence.")
    paused_seconds: float | None = Field(
        default=None,
        ge=0,
        description="Fencing began to the new epoch published: producers of the topic waited.",
    )
    duration_seconds: float | None = Field(default=None, ge=0, description="Start to Completed/Aborted.")
    started_at: Timestamp | None = Field(
        default=None, description="When the expansion began: partitions creation (RFC 3339)."
    )
    fenced_at: Timestamp | None = Field(default=None, description="When fencing began (RFC 3339).")
    fenced_through_kafka: list[str] = Field(
        default_factory=list,
        description="Producers this expansion had Kafka fence (InitProducerId of their transactional "
        "ids) because they did not acknowledge in time: they wrote nothing after the thresholds.",
    )
    message: str = Field(default="", description="What happened last, for people.")
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Progressing, Failed, Waiting, PartitionsInSync, KafkaTopicInSync.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="Last metadata.generation handled."
    )


class OrderedTopicExpansion(Resource):
    """Grows a topic's partition count without reordering any key (KIP-253)."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        kind="OrderedTopicExpansion",
        plural="orderedtopicexpansions",
        singular="orderedtopicexpansion",
        short_names=["ote"],
        printer_columns=[
            PrinterColumn(
                name="Topic", type="string", json_path=".spec.topic", description="The topic to grow."
            ),
            PrinterColumn(
                name="From", type="integer", json_path=".status.fromPartitions",
                description="Partition count before the expansion.",
            ),
            PrinterColumn(
                name="To", type="integer", json_path=".spec.partitions", description="Target partition count."
            ),
            PrinterColumn(
                name="Phase", type="string", json_path=".status.phase",
                description="Pending, Creating, Fencing, Expanding, Publishing, Completed, Aborted, Failed.",
            ),
            PrinterColumn(
                name="Ready", type="string", json_path='.status.conditions[?(@.type=="Ready")].status',
                description="True once the expansion completed.",
            ),
            PrinterColumn(
                name="Epoch", type="integer", json_path=".status.epoch", priority=1,
                description="The epoch this expansion creates.",
            ),
            PrinterColumn(
                name="Age", type="date", json_path=".metadata.creationTimestamp",
                description="Time since the expansion was created.",
            ),
        ],
        validations=[
            # The operator reads the spec once per expansion: an edit after it started (or
            # ended, also by failing before it started) would be ignored, so it is refused.
            Validation(
                rule="!has(oldSelf.status) || self.spec == oldSelf.spec || "
                "(!has(oldSelf.status.startedAt) && !(has(oldSelf.status.phase) && "
                "oldSelf.status.phase in ['Completed', 'Aborted', 'Failed']))",
                message="spec cannot change once the expansion has started or ended (status.startedAt "
                "or a final status.phase is set): create another OrderedTopicExpansion for a new "
                "target or setting",
            )
        ],
    )  # fmt: skip
    kind: Literal["OrderedTopicExpansion"] = "OrderedTopicExpansion"
    spec: OrderedTopicExpansionSpec
    status: OrderedTopicExpansionStatus | None = None
