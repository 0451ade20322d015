"""Every topic ordo's producers write, judged whether or not ordo ever expanded it (pure).

Producers place keys by the partition count of the topic's active epoch in the epoch log. A topic
ordo never expanded has no history there: its first producers use the broker's count and report
it, and the operator records that count as epoch 0 (``TopicVerdict.record``), so a producer that
starts after partitions were added outside ordo uses the same count as the others instead of the
larger one it would read from the broker. Partitions beyond the active epoch's count belong to no
epoch: ordo's producers leave them empty, gated consumers hold their records, and the operator
says so, naming the expansion that takes them into an epoch in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ordo.epochs import EpochHistory

__all__ = ["TopicVerdict", "TopicView", "added_outside", "first_count", "judge_topic"]


@dataclass(frozen=True)
class TopicView:
    """What the operator read of one topic."""

    topic: str
    broker_partitions: int | None
    """The broker's partition count; None when the topic does not exist."""
    history: EpochHistory | None
    producer_counts: Mapping[str, int]
    """Live producers of the topic → the partition count each reports it produces with."""
    expanding: bool = False
    """An OrderedTopicExpansion of the topic is in flight: its partitions exist before its epoch."""


@dataclass(frozen=True)
class TopicVerdict:
    topic: str
    in_sync: bool
    reason: str
    message: str
    record: EpochHistory | None = None
    """The history to write first: epoch 0 of a topic the log does not know yet."""


def added_outside(topic: str, known: int, broker: int, epoch: int) -> str:
    """What partitions beyond the active epoch mean, and what to do about them."""
    return (
        f"{topic!r} has {broker} partitions but its producers use the {known} of epoch {epoch}: partitions "
        f"{known}..{broker - 1} were added outside ordo (or by an expansion aborted after creating them), "
        "belong to no epoch, and gated consumers hold their records; an OrderedTopicExpansion of "
        f"{topic!r} to {broker} or more partitions takes them into an epoch in order"
    )


def first_count(producer_counts: Mapping[str, int], broker: int) -> int:
    """Epoch 0's partition count for a topic the epoch log does not know: the smallest count its
    producers report (the topic's first: a larger one was read after partitions were added), or
    the broker's when none reports one."""
    return min(producer_counts.values(), default=broker)


def judge_topic(view: TopicView) -> TopicVerdict | None:
    """The topic's verdict, or None when there is nothing to judge (no such topic, or an expansion
    of it in flight)."""
    topic, broker, history = view.topic, view.broker_partitions, view.history
    if broker is None or view.expanding or (history is not None and history.fencing):
        return None
    record = None
    if history is None:
        reported = sorted(set(view.producer_counts.values()))
        history = record = EpochHistory.initial(topic, first_count(view.producer_counts, broker))
        if len(reported) > 1:
            differing = {p: n for p, n in sorted(view.producer_counts.items()) if n != reported[0]}
            return TopicVerdict(
                topic,
                False,
                "ProducersDisagree",
                f"producers of {topic!r} used different partition counts {reported} before ordo recorded "
                f"one; epoch 0 is {reported[0]}, and {', '.join(differing)} move to it (keys they wrote "
                "by the larger count may be out of order once). "
                + (added_outside(topic, reported[0], broker, 0) if broker > reported[0] else ""),
                record,
            )
    known, epoch = history.active.partitions, history.active.epoch
    if broker > known:
        return TopicVerdict(
            topic, False, "PartitionsAddedOutsideOrdo", added_outside(topic, known, broker, epoch), record
        )
    return TopicVerdict(
        topic, True, "InSync", f"{topic!r} has the {known} partitions of epoch {epoch}", record
    )
