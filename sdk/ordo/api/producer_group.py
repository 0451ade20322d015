"""The ProducerGroup resource (KIP-509): pods that share a fixed set of source partitions."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from ..assignment import Strategy
from ..control_topics import DEFAULT_CHECKPOINT_TOPIC
from ..member_wire import DEFAULT_MAX_IDLE_SECONDS
from .common import (
    TOPIC_PATTERN,
    Condition,
    CrdInfo,
    LabelSelector,
    Model,
    PrinterColumn,
    Resource,
    Validation,
)
from .kafka import KafkaConnection

__all__ = [
    "MAX_SESSION_TIMEOUT_SECONDS",
    "MemberStatus",
    "PartitionCheckpoint",
    "ProducerGroup",
    "ProducerGroupSpec",
    "ProducerGroupStatus",
]

MAX_SOURCE_PARTITIONS = 100_000
MAX_SESSION_TIMEOUT_SECONDS = 3600
EMPTY_SELECTOR = Validation(
    rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || "
    "(has(self.matchExpressions) && size(self.matchExpressions) > 0)",
    message="an empty selector would select every pod in the namespace: give the member pods' labels "
    "in matchLabels or matchExpressions",
)
# Members open their producers (transactional or idempotent) and their checkpoint reader for these
# two settings; switching them under members that own partitions would cut units in half.
RECREATE_TO_CHANGE = (
    "delete the ProducerGroup (members give their partitions up; the checkpoints stay in Kafka) "
    "and create it again with the new value"
)
FIXED_EXACTLY_ONCE = Validation(
    rule="self == oldSelf", message=f"exactlyOnce cannot change on a live group: {RECREATE_TO_CHANGE}"
)
FIXED_CHECKPOINT_TOPIC = Validation(
    rule="self == oldSelf",
    message="checkpointTopic cannot change on a live group (every source partition would restart "
    f"without its checkpoint): {RECREATE_TO_CHANGE}, which starts afresh from the new topic",
)


class ProducerGroupSpec(Model):
    """Desired state of a producer group."""

    source_partitions: int = Field(
        ge=1,
        le=MAX_SOURCE_PARTITIONS,
        description="Number of source partitions (KIP-509's SOURCE_PARTITION_COUNT), numbered from 0. "
        "May grow; shrinks only when the removed partitions have no owner.",
    )
    selector: LabelSelector = Field(
        description="Selects the member pods; must not be empty.",
        json_schema_extra={"x-kubernetes-validations": [EMPTY_SELECTOR.as_schema()]},
    )
    session_timeout_seconds: int = Field(
        default=30,
        ge=1,
        le=MAX_SESSION_TIMEOUT_SECONDS,
        description="A member whose Lease is not renewed for this long is dead. May change on a "
        "live group: a shorter value applies to each member once it has taken it (at most one old "
        "session later), so the change itself moves no partition.",
    )
    assignment: Strategy = Field(
        default=Strategy.STICKY,
        description="sticky (fewest moves, default), range or roundRobin.",
    )
    max_idle_seconds: int = Field(
        default=DEFAULT_MAX_IDLE_SECONDS,
        ge=1,
        le=86_400,
        description="A member that owns partitions and neither calls alive() nor commits a unit for "
        "this long (a hung copy loop, Kafka out of reach) gives them up and they move to other "
        "members; like a consumer's max.poll.interval.ms. May change on a live group.",
    )
    checkpoint_topic: str = Field(
        default=DEFAULT_CHECKPOINT_TOPIC,
        pattern=TOPIC_PATTERN,
        description="Compacted topic holding each source partition's restart checkpoint. Fixed once created.",
        json_schema_extra={"x-kubernetes-validations": [FIXED_CHECKPOINT_TOPIC.as_schema()]},
    )
    exactly_once: bool = Field(
        default=True,
        description="Write data and checkpoint in one Kafka transaction per source partition. "
        "Fixed once created.",
        json_schema_extra={"x-kubernetes-validations": [FIXED_EXACTLY_ONCE.as_schema()]},
    )
    kafka: KafkaConnection | None = Field(
        default=None, description="Kafka connection; the operator's default when absent."
    )

    @field_validator("selector")
    @classmethod
    def _not_empty(cls, value: LabelSelector) -> LabelSelector:
        if not value.match_labels and not value.match_expressions:
            raise ValueError(EMPTY_SELECTOR.message)
        return value


class MemberStatus(Model):
    """One live member."""

    pod: str = Field(description="Member pod name.")
    partitions: list[int] = Field(default_factory=list, description="Source partitions assigned to it.")
    acked: int | None = Field(default=None, description="Latest assignment generation it acknowledged.")


class PartitionCheckpoint(Model):
    """Where one source partition stands."""

    partition: int = Field(ge=0, description="Source partition.")
    checkpoint: str | None = Field(default=None, description="Latest committed restart checkpoint.")
    owner: str | None = Field(default=None, description="Member producing it now.")


class ProducerGroupStatus(Model):
    """What the operator did, for people; clients never read it."""

    generation: int = Field(default=0, ge=0, description="Assignment generation, bumped on every change.")
    member_count: int = Field(default=0, ge=0, description="Live members.")
    members: list[MemberStatus] = Field(
        default_factory=list, description="Live members and their partitions."
    )
    standby: list[str] = Field(default_factory=list, description="Members with nothing to do.")
    unassigned: list[int] = Field(default_factory=list, description="Source partitions without an owner.")
    last_rebalance_seconds: float | None = Field(
        default=None, ge=0, description="Duration of the last rebalance, from change to all acknowledged."
    )
    checkpoints: list[PartitionCheckpoint] = Field(
        default_factory=list,
        description="The latest checkpoint and owner of each of the first 1,000 source partitions "
        "(the checkpoint topic holds every partition's).",
    )
    checkpointed: int = Field(default=0, ge=0, description="Source partitions with a committed checkpoint.")
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Rebalancing, Degraded.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="Last metadata.generation handled."
    )


class ProducerGroup(Resource):
    """Producer pods sharing a fixed set of source partitions, each with a restart checkpoint (KIP-509)."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        kind="ProducerGroup",
        plural="producergroups",
        singular="producergroup",
        short_names=["pg"],
        printer_columns=[
            PrinterColumn(
                name="Partitions",
                type="integer",
                json_path=".spec.sourcePartitions",
                description="Source partitions shared by the members.",
            ),
            PrinterColumn(
                name="Members",
                type="integer",
                json_path=".status.memberCount",
                description="Live members: Ready pods with a renewed Lease.",
            ),
            PrinterColumn(
                name="Generation",
                type="integer",
                json_path=".status.generation",
                description="Assignment generation, bumped on every change.",
            ),
            PrinterColumn(
                name="Ready",
                type="string",
                json_path='.status.conditions[?(@.type=="Ready")].status',
                description="True once the assignment is settled (every member acknowledged it).",
            ),
            PrinterColumn(
                name="Age",
                type="date",
                json_path=".metadata.creationTimestamp",
                description="Time since the group was created.",
            ),
        ],
    )
    kind: Literal["ProducerGroup"] = "ProducerGroup"
    spec: ProducerGroupSpec
    status: ProducerGroupStatus | None = None
