"""plans/topics.py: every topic ordo's producers write gets one partition count, and partitions
added outside ordo are named with what to do."""

from __future__ import annotations

from ordo._compacted import durable_settings
from ordo.epochs import EpochHistory
from ordo_operator.plans.expansion import ExpansionState, ProducerView, World, plan_expansion
from ordo_operator.plans.topics import (
    ControlTopicView,
    TopicView,
    judge_control_topics,
    judge_topic,
    orphan_fence,
)

T = "orders"


def test_a_topic_the_log_does_not_know_is_recorded_with_its_producers_count() -> None:
    verdict = judge_topic(TopicView(T, 4, None, {"a": 4, "b": 4}))
    assert verdict is not None and verdict.in_sync and verdict.record == EpochHistory.initial(T, 4)
    alone = judge_topic(TopicView(T, 4, None, {}))  # a history is there to keep, even without producers
    assert alone is not None and alone.record == EpochHistory.initial(T, 4)


def test_partitions_added_before_ordo_recorded_the_topic_belong_to_no_epoch() -> None:
    """Producers started at 4; the topic grew to 6 outside ordo; epoch 0 is their 4, not 6."""
    verdict = judge_topic(TopicView(T, 6, None, {"a": 4}))
    assert verdict is not None and not verdict.in_sync and verdict.reason == "PartitionsAddedOutsideOrdo"
    assert verdict.record == EpochHistory.initial(T, 4)
    assert "partitions 4..5 were added outside ordo" in verdict.message
    assert f"an OrderedTopicExpansion of {T!r} to 6 or more partitions" in verdict.message


def test_producers_that_read_different_counts_are_brought_to_the_first() -> None:
    verdict = judge_topic(TopicView(T, 6, None, {"early": 4, "late": 6}))
    assert verdict is not None and verdict.reason == "ProducersDisagree" and not verdict.in_sync
    assert verdict.record == EpochHistory.initial(T, 4) and "late move to it" in verdict.message


def test_a_recorded_topic_is_judged_by_its_active_epoch_and_not_while_it_grows() -> None:
    history = EpochHistory.initial(T, 4)
    in_sync = judge_topic(TopicView(T, 4, history, {"a": 4}))
    assert in_sync is not None and in_sync.in_sync and in_sync.record is None
    grown = judge_topic(TopicView(T, 5, history, {}))
    assert grown is not None and not grown.in_sync and "partitions 4..4" in grown.message
    assert judge_topic(TopicView(T, 8, history, {}, expanding=True)) is None, "created before its epoch"
    assert judge_topic(TopicView(T, 8, history.begin_fence(8), {})) is None
    assert judge_topic(TopicView(T, None, history, {})) is None, "no such topic"


def test_an_expansion_of_a_topic_ordo_never_recorded_starts_from_its_producers_count() -> None:
    """Adopting partitions added outside ordo: 4 -> 6 with partitions 4 and 5 already there, so the
    prior sets are those of 4 -> 6 (not of 6 -> 6, which would fail as not larger)."""
    world = World(6, None, {"a": ProducerView(partitions=4)})
    step = plan_expansion(T, 6, 60, ExpansionState(), world)
    assert (step.state.from_partitions, step.state.to_partitions) == (4, 6), step


# --- orphan fences: a fencing epoch no expansion drives is aborted after a grace ------------------


def test_a_fence_no_expansion_drives_is_aborted_only_after_the_grace() -> None:
    fencing = EpochHistory.initial(T, 4).begin_fence(8)
    assert orphan_fence(T, fencing, False, 299, 300) is None, "a restarted operator's daemons start first"
    found = orphan_fence(T, fencing, False, 300, 300)
    assert found is not None and found.epoch == 1 and found.aborted == fencing.abort()
    assert found.aborted.active.partitions == 4 and "producers resume at 4 partitions" in found.message


def test_a_fence_is_no_orphan_while_an_expansion_is_in_flight_nor_a_concluded_epoch() -> None:
    fencing = EpochHistory.initial(T, 4).begin_fence(8)
    assert orphan_fence(T, fencing, True, 10_000, 300) is None
    assert orphan_fence(T, fencing, False, 10_000, 0) is None, "0 turns the sweep off"
    assert orphan_fence(T, fencing.abort(), False, 10_000, 300) is None
    assert orphan_fence(T, fencing.publish({p: 1 for p in range(4)}), False, 10_000, 300) is None
    assert orphan_fence(T, None, False, 10_000, 300) is None


# --- control topics' replication: said when the cluster allows better ---------------------------


def test_control_topics_below_three_replicas_or_two_in_sync_are_named_with_the_value_to_set() -> None:
    weak = [ControlTopicView("__ordo_epochs", 1, 1), ControlTopicView("__ordo_producers", 3, 1)]
    warnings = judge_control_topics(3, [*weak, ControlTopicView("__ordo_checkpoints", 3, 2)])
    assert [(w.topic, w.setting, w.value, w.wanted) for w in warnings] == [
        ("__ordo_epochs", "replication.factor", 1, 3),
        ("__ordo_epochs", "min.insync.replicas", 1, 2),
        ("__ordo_producers", "min.insync.replicas", 1, 2),
    ]
    assert "raise it to 3" in warnings[0].message and "cluster of 3 brokers" in warnings[0].message
    assert "--add-config min.insync.replicas=2" in warnings[2].message


def test_a_cluster_of_fewer_than_three_brokers_gets_no_warning() -> None:
    assert judge_control_topics(1, [ControlTopicView("__ordo_epochs", 1, 1)]) == []
    assert judge_control_topics(2, [ControlTopicView("__ordo_epochs", 2, 1)]) == []


def test_ordo_creates_control_topics_as_durable_as_the_cluster_allows() -> None:
    assert [durable_settings(n) for n in (1, 2, 3, 5)] == [(1, 1), (2, 2), (3, 2), (3, 2)]
    assert judge_control_topics(5, [ControlTopicView("t", *durable_settings(5))]) == []
