"""plans/topics.py: every topic ordo's producers write gets one partition count, and partitions
added outside ordo are named with what to do."""

from __future__ import annotations

from ordo.epochs import EpochHistory
from ordo_operator.plans.expansion import ExpansionState, ProducerView, World, plan_expansion
from ordo_operator.plans.topics import TopicView, judge_topic

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
