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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ordo.epochs import EpochHistory

__all__ = [
    "ControlTopicView",
    "DurabilityWarning",
    "OrphanFence",
    "TopicVerdict",
    "TopicView",
    "added_outside",
    "first_count",
    "judge_control_topics",
    "judge_topic",
    "orphan_fence",
]


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


@dataclass(frozen=True)
class OrphanFence:
    """A fencing epoch no expansion drives: the history that aborts it, and what to say."""

    topic: str
    epoch: int
    aborted: EpochHistory
    message: str


def orphan_fence(
    topic: str, history: EpochHistory | None, in_flight: bool, orphaned_for: float, grace: float
) -> OrphanFence | None:
    """The abort of ``topic``'s fencing epoch when no OrderedTopicExpansion of the topic has been
    in flight (driven, or being undone after a delete) for ``orphaned_for`` >= ``grace`` seconds:
    its expansion is gone (deleted while its delete could not reach Kafka, or recorded Aborted by
    an operator killed before it wrote the abort), and its producers would wait for ever. None
    while an expansion may still be its own (``grace`` covers a restarted operator's daemons
    starting again; 0 turns the sweep off)."""
    if history is None or not history.fencing or in_flight or grace <= 0 or orphaned_for < grace:
        return None
    epoch = history.current
    return OrphanFence(
        topic,
        epoch.epoch,
        history.abort(),
        f"epoch {epoch.epoch} of {topic!r} ({epoch.from_partitions} -> {epoch.partitions}) was fencing with "
        f"no OrderedTopicExpansion of the topic in flight for {orphaned_for:.0f}s (its expansion is gone): "
        f"aborted, producers resume at {epoch.from_partitions} partitions",
    )


@dataclass(frozen=True)
class ControlTopicView:
    """One of ordo's control topics as the cluster has it."""

    topic: str
    replication: int
    min_insync: int
    """Its min.insync.replicas: its own, or the broker's default it takes."""


@dataclass(frozen=True)
class DurabilityWarning:
    topic: str
    setting: str
    """``replication.factor`` or ``min.insync.replicas``."""
    value: int
    wanted: int
    message: str


def judge_control_topics(brokers: int, topics: Sequence[ControlTopicView]) -> list[DurabilityWarning]:
    """What to fix about the control topics (the epoch log, the registry, the checkpoints) on a
    cluster of ``brokers``: with 3 or more, a replication factor below 3 leaves them lost or
    unwritable with a broker, and min.insync.replicas below 2 lets an acks=all write be
    acknowledged by one replica, lost with it (a lost epoch history, fence acknowledgement or
    checkpoint breaks the order or the exactly-once promise). On a smaller cluster nothing better
    is possible: no warning."""
    if brokers < 3:
        return []
    warnings: list[DurabilityWarning] = []
    for topic in topics:
        if topic.replication < 3:
            warnings.append(
                DurabilityWarning(
                    topic.topic,
                    "replication.factor",
                    topic.replication,
                    3,
                    f"control topic {topic.topic!r} has replication factor {topic.replication} on a "
                    f"cluster of {brokers} brokers: raise it to 3 (kafka-reassign-partitions with 3 "
                    "replicas for partition 0); a broker's loss can lose or stop it",
                )
            )
        if topic.min_insync < 2:
            warnings.append(
                DurabilityWarning(
                    topic.topic,
                    "min.insync.replicas",
                    topic.min_insync,
                    2,
                    f"control topic {topic.topic!r} has min.insync.replicas={topic.min_insync}: set it to 2 "
                    f"(kafka-configs --alter --entity-type topics --entity-name {topic.topic} --add-config "
                    "min.insync.replicas=2); an acknowledged write can be lost with one broker",
                )
            )
    return warnings
