"""plans/kafka_topic.py: a Strimzi KafkaTopic is raised to the expansion's count only once Kafka
has the partitions, never lowered, never past what Kafka has; bad input changes nothing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ordo_operator.plans.kafka_topic import (
    Follow,
    KafkaTopicView,
    Unreadable,
    plan_kafka_topic,
    worth_recording,
)

T, REF = "orders", "kafka/orders"


def test_a_kafkatopic_behind_is_raised_to_the_new_count_once_the_partitions_exist() -> None:
    follow = plan_kafka_topic(REF, T, 8, 8, KafkaTopicView(T, 4))
    assert follow.patch_partitions == 8 and follow.in_sync and follow.reason == "KafkaTopicRaised"
    assert "from 4 to 8" in follow.message


def test_not_before_kafka_has_the_partitions_else_strimzi_would_create_them_unfenced() -> None:
    follow = plan_kafka_topic(REF, T, 8, 4, KafkaTopicView(T, 4))
    assert follow.patch_partitions is None and not follow.in_sync and follow.reason == "PartitionsNotCreated"


def test_a_kafkatopic_in_step_or_raised_by_a_later_expansion_is_left_as_it_is() -> None:
    assert plan_kafka_topic(REF, T, 8, 8, KafkaTopicView(T, 8)) == Follow(
        True, "InSync", "KafkaTopic kafka/orders asks for 8 partitions, at least the 8 of this expansion"
    )
    later = plan_kafka_topic(REF, T, 8, 16, KafkaTopicView(T, 16))  # a later expansion grew it on
    assert later.in_sync and later.patch_partitions is None


def test_a_kafkatopic_asking_for_more_than_kafka_has_is_named_not_followed() -> None:
    follow = plan_kafka_topic(REF, T, 8, 8, KafkaTopicView(T, 12))
    assert follow.patch_partitions is None and not follow.in_sync and follow.reason == "KafkaTopicAhead"
    assert "without ordo's fence" in follow.message


def test_a_kafkatopic_of_another_topic_is_bad_input_and_nothing_is_patched() -> None:
    follow = plan_kafka_topic(REF, T, 8, 8, KafkaTopicView("payments", 4))
    assert follow == Follow(
        False,
        "KafkaTopicOfOtherTopic",
        "KafkaTopic kafka/orders manages the topic 'payments', not 'orders': spec.kafkaTopicRef names "
        "the wrong KafkaTopic; nothing patched",
    )


def test_a_kafkatopic_without_partitions_leaves_the_count_to_kafka() -> None:
    follow = plan_kafka_topic(REF, T, 8, 8, KafkaTopicView(T, None))
    assert follow.in_sync and follow.patch_partitions is None and follow.reason == "PartitionsUnmanaged"


@pytest.mark.parametrize(
    ("unreadable", "says"),
    [
        (Unreadable.NOT_FOUND, "does not exist"),
        (Unreadable.NO_CRD, "is Strimzi 0.49 or later installed?"),
        (Unreadable.FORBIDDEN, "may not get and patch KafkaTopic kafka/orders (403 Forbidden)"),
    ],
)
def test_what_cannot_be_read_is_a_condition_that_says_why(unreadable: Unreadable, says: str) -> None:
    follow = plan_kafka_topic(REF, T, 8, 8, unreadable, "403 Forbidden")
    assert not follow.in_sync and follow.patch_partitions is None and follow.reason == unreadable.value
    assert says in follow.message


@given(
    target=st.integers(2, 64),
    kafka_has=st.integers(1, 128),
    declared=st.none() | st.integers(1, 200),
    named=st.sampled_from([T, "payments"]),
)
def test_it_never_lowers_never_passes_kafka_and_patches_only_its_own_topic(
    target: int, kafka_has: int, declared: int | None, named: str
) -> None:
    follow = plan_kafka_topic(REF, T, target, kafka_has, KafkaTopicView(named, declared))
    if follow.patch_partitions is not None:
        assert named == T and declared is not None
        assert declared < follow.patch_partitions == target <= kafka_has
    else:
        assert follow.reason != "KafkaTopicRaised"


def test_a_condition_is_written_when_it_changes_and_a_raise_is_not_overwritten_by_in_sync() -> None:
    raised = plan_kafka_topic(REF, T, 8, 8, KafkaTopicView(T, 4))
    in_step = plan_kafka_topic(REF, T, 8, 8, KafkaTopicView(T, 8))
    missing = plan_kafka_topic(REF, T, 8, 8, Unreadable.NOT_FOUND)
    assert worth_recording(raised, None) and worth_recording(missing, None)
    assert not worth_recording(in_step, (True, raised.message))  # what was done stays said
    assert not worth_recording(missing, (False, missing.message))  # said once, not at every check
    assert worth_recording(in_step, (False, missing.message)) and worth_recording(
        missing, (True, raised.message)
    )
