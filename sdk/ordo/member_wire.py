"""The wire between the operator and a ProducerGroup's members: one definition for both sides.

Downlink: the operator writes each member's assignment into an annotation on its pod.
Uplink: each member renews a Lease of its own, whose annotations acknowledge generations.
Both name a unit's transactional id and its checkpoint record's key the same way.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "ACK_ANNOTATION",
    "ASSIGNMENT_ANNOTATION",
    "DEFAULT_MAX_IDLE_SECONDS",
    "GROUP_LABEL",
    "GroupSettings",
    "MemberAssignment",
    "ProtocolError",
    "checkpoint_key",
    "lease_name",
    "transactional_id",
]

ASSIGNMENT_ANNOTATION = "ordo.dev/assignment"
ACK_ANNOTATION = "ordo.dev/acked-generation"
GROUP_LABEL = "ordo.dev/group"
"""On each member's Lease and pod: the group it belongs to (the operator watches Leases and pods by it;
the pod's label is the application's to set, in its pod template)."""


class ProtocolError(ValueError):
    """A record or annotation that does not follow ordo's protocol; says which and why."""


DEFAULT_MAX_IDLE_SECONDS = 300
"""A member that neither calls ``alive()`` nor commits a unit for this long gives its partitions up."""


class GroupSettings(BaseModel):
    """What members take from the ProducerGroup's spec (they may not read the resource itself).

    Settings a member does not know are ignored, so an operator may add one before every member
    is upgraded."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    session_timeout_seconds: int = Field(ge=1)
    exactly_once: bool
    checkpoint_topic: str = Field(min_length=1)
    max_idle_seconds: int = Field(default=DEFAULT_MAX_IDLE_SECONDS, ge=1)

    def same_producers(self, other: GroupSettings) -> bool:
        """Whether the member's producers and checkpoint reader serve ``other`` as they are (the
        timeouts can change under a running member; the mode and the checkpoint topic cannot)."""
        return (self.exactly_once, self.checkpoint_topic) == (other.exactly_once, other.checkpoint_topic)


class MemberAssignment(BaseModel):
    """The value of a member pod's ``ordo.dev/assignment`` annotation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: str = Field(min_length=1)
    generation: int = Field(ge=0)
    partitions: tuple[int, ...] = ()
    revoking: tuple[int, ...] = Field(
        default=(),
        description="Partitions taken away in this generation: the operator gives them to another "
        "member only after this one acknowledges the generation (stopped producing, checkpointed).",
    )
    settings: GroupSettings | None = Field(
        default=None, description="The group's settings members follow (from its spec)."
    )

    def with_settings(self, settings: GroupSettings) -> MemberAssignment:
        return self.model_copy(update={"settings": settings})

    def to_annotation(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_annotation(cls, value: str, pod: str = "?") -> MemberAssignment:
        try:
            return cls.model_validate(json.loads(value))
        except (ValueError, ValidationError) as error:
            raise ProtocolError(
                f"pod {pod}: annotation {ASSIGNMENT_ANNOTATION} is malformed: {error}"
            ) from None


def lease_name(pod: str) -> str:
    """Each member renews the Lease named after its pod (RBAC can bind it to that name)."""
    return pod


def checkpoint_key(namespace: str, group: str, partition: int) -> str:
    return f"{namespace}/{group}/{partition}"


def transactional_id(namespace: str, group: str, partition: int) -> str:
    """One per source partition: the next owner's init fences the previous owner's producer."""
    return f"ordo.{namespace}.{group}.{partition}"
