"""Whether to raise a Strimzi KafkaTopic's ``spec.partitions`` after an expansion, pure.

Strimzi's topic operator never decreases partitions: a KafkaTopic that asks for fewer than the
topic has goes NotReady ("Number of partitions cannot be decreased"), and one that asks for more
makes it create them itself, outside ordo's fence. So the KafkaTopic is raised to the expansion's
count only once Kafka has that many partitions, never lowered, and never past what Kafka has.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["CONDITION", "Follow", "KafkaTopicView", "Unreadable", "plan_kafka_topic", "worth_recording"]

CONDITION = "KafkaTopicInSync"


@dataclass(frozen=True)
class KafkaTopicView:
    """What the operator read of the KafkaTopic."""

    topic_name: str
    """``spec.topicName``, or ``metadata.name`` when it is absent (as Strimzi reads it)."""
    partitions: int | None
    """``spec.partitions``; None: absent (the broker's ``num.partitions`` at creation)."""


class Unreadable(StrEnum):
    """Why there is no KafkaTopic to look at."""

    NOT_FOUND = "KafkaTopicNotFound"
    NO_CRD = "KafkaTopicCrdMissing"
    FORBIDDEN = "KafkaTopicForbidden"


@dataclass(frozen=True)
class Follow:
    """The KafkaTopicInSync condition, and the count to patch into ``spec.partitions`` (if any)."""

    in_sync: bool
    reason: str
    message: str
    patch_partitions: int | None = None


def plan_kafka_topic(
    ref: str,
    topic: str,
    target: int,
    topic_partitions: int,
    found: KafkaTopicView | Unreadable,
    detail: str = "",
) -> Follow:
    """What to do about KafkaTopic ``ref`` (``namespace/name``) for an expansion of ``topic`` to
    ``target`` partitions, Kafka having ``topic_partitions`` now; ``detail``: the API server's
    words when ``found`` is Unreadable."""
    if found == Unreadable.NOT_FOUND:
        return Follow(
            False, found, f"KafkaTopic {ref} (spec.kafkaTopicRef) does not exist: nothing patched; "
            f"a KafkaTopic for {topic!r} needs spec.partitions: {target}",
        )  # fmt: skip
    if found == Unreadable.NO_CRD:
        return Follow(
            False, found, f"the API server has no KafkaTopic resource (kafkatopics.kafka.strimzi.io/v1; "
            f"is Strimzi 0.49 or later installed?): KafkaTopic {ref} (spec.kafkaTopicRef) not patched",
        )  # fmt: skip
    if found == Unreadable.FORBIDDEN:
        return Follow(
            False, found, f"the operator may not get and patch KafkaTopic {ref} ({detail}): the chart "
            "grants it on kafkatopics only in the namespaces it serves; nothing patched",
        )  # fmt: skip
    assert isinstance(found, KafkaTopicView)
    if found.topic_name != topic:
        return Follow(
            False, "KafkaTopicOfOtherTopic", f"KafkaTopic {ref} manages the topic {found.topic_name!r}, "
            f"not {topic!r}: spec.kafkaTopicRef names the wrong KafkaTopic; nothing patched",
        )  # fmt: skip
    if found.partitions is None:
        return Follow(
            True, "PartitionsUnmanaged", f"KafkaTopic {ref} sets no spec.partitions: "
            "Strimzi's topic operator leaves the count to Kafka; nothing to raise",
        )  # fmt: skip
    if topic_partitions < target:  # raised now, Strimzi would create the partitions unfenced
        return Follow(
            False, "PartitionsNotCreated", f"{topic!r} has {topic_partitions} partitions, not yet "
            f"{target}: KafkaTopic {ref} is raised once they exist",
        )  # fmt: skip
    if found.partitions > topic_partitions:
        return Follow(
            False, "KafkaTopicAhead", f"KafkaTopic {ref} asks for {found.partitions} partitions, "
            f"{topic!r} has {topic_partitions}: Strimzi's topic operator adds them without ordo's "
            "fence (keys move unfenced); grow the topic with an OrderedTopicExpansion instead",
        )  # fmt: skip
    if found.partitions >= target:
        return Follow(
            True, "InSync", f"KafkaTopic {ref} asks for {found.partitions} partitions, at least the "
            f"{target} of this expansion",
        )  # fmt: skip
    return Follow(
        True, "KafkaTopicRaised", f"raised spec.partitions of KafkaTopic {ref} from "
        f"{found.partitions} to {target} once {topic!r} had them",
        patch_partitions=target,
    )  # fmt: skip


def worth_recording(follow: Follow, before: tuple[bool, str] | None) -> bool:
    """Whether ``follow`` changes the condition, ``before`` its (status, message) or None: a
    KafkaTopic still in step keeps the condition that says what was done (e.g. KafkaTopicRaised)."""
    if before is None:
        return True
    was_in_sync, message = before
    if was_in_sync and follow.in_sync and follow.patch_partitions is None:
        return False
    return (was_in_sync, message) != (follow.in_sync, follow.message)
