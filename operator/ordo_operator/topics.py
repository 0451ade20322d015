"""The topic watch: every ``topic_check_seconds``, each topic ordo's producers write on each Kafka
cluster the operator talks to is judged (``plans.topics.judge_topic``), whether or not ordo ever
expanded it. Epoch 0 of a topic the epoch log does not know is recorded, so producers agree on
one partition count; partitions added outside ordo are said once per change: a Warning Event on
the operator's pod (``POD_NAME``/``POD_NAMESPACE``, set by the chart), a log line, and the gauge
``ordo_topic_partitions_outside_epochs``.

It also keeps the epoch log sound: a fencing epoch no expansion drives any more (an orphan fence,
``plans.topics.orphan_fence``) is aborted after ``orphan_fence_seconds``; a refused record left
as a topic's last one is answered with its newest history again; and the control topics'
replication is checked once per cluster (``judge_control_topics``).

Only the replica kopf lets work does any of it (``replicas.Replica``): a standby knows no
expansion in flight, and would take an expansion's new partitions for growth outside ordo. A
replica that starts working waits ``SETTLE_SECONDS`` first, for kopf to list the expansions.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from ordo.control_topics import DEFAULT_CHECKPOINT_TOPIC

from . import metrics
from .config import OperatorConfig
from .kafka import KafkaSide, clients_for, known_sides
from .kube import kafka_config, post_operator_event
from .plans.topics import (
    ControlTopicView,
    TopicVerdict,
    TopicView,
    judge_control_topics,
    judge_topic,
    orphan_fence,
)
from .replicas import Replica

__all__ = ["SETTLE_SECONDS", "TopicWatch", "control_topic_views"]

SETTLE_SECONDS = 5.0
"""A replica that starts working judges nothing before this: kopf lists the expansions (whose
phases say which topics grow) and starts their daemons first."""
_log = logging.getLogger(__name__)


class TopicWatch:
    """A thread of the operator's; ``in_flight(topic)`` says whether an expansion of the topic is
    in flight (its new partitions exist before its epoch does, its fence is its own)."""

    def __init__(
        self, settings: OperatorConfig, in_flight: Callable[[str], bool], replica: Replica | None = None
    ) -> None:
        self.settings, self.interval = settings, settings.topic_check_seconds
        self.in_flight = in_flight
        self.replica = replica or Replica(None, "", 0, ())
        self.said: dict[str, tuple[bool, str]] = {}
        self.working_since: float | None = None
        self.orphaned: dict[tuple[int, str, int], float] = {}  # (side, topic, epoch) -> first seen so
        self.checked: set[int] = set()  # sides whose control topics were checked
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ordo-topic-watch", daemon=True)

    def start(self) -> TopicWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        # at once, then every interval: the default cluster's clients create ordo's control
        # topics, which producers need before any expansion ever ran
        while True:
            self._turn()
            if self._stop.wait(self.interval):
                return

    def _turn(self) -> None:
        working = self.replica.working()
        metrics.OPERATOR_WORKING.set(1 if working else 0)
        if not working:
            self.working_since = None
            return
        if self.working_since is None:
            self.working_since = time.monotonic()
        if self.settings.kafka_bootstrap:  # the default cluster, watched from the start
            try:
                clients_for(kafka_config(None, "", self.settings), self.settings)
            except Exception as error:  # unreachable now: the next turn tries again
                _log.warning("topic watch: the default Kafka: %s", error)
        if time.monotonic() - self.working_since < SETTLE_SECONDS:
            return
        for side in known_sides():
            try:
                self.check(side)
            except Exception as error:  # Kafka unreachable now: the next turn tries again
                metrics.record_error(metrics.error_kind(error))
                _log.warning("topic watch: %s", error)

    def check(self, side: KafkaSide) -> None:
        if id(side) not in self.checked:  # once per cluster: when the operator starts or first reaches it
            self.checked.add(id(side))
            try:
                self.check_control_topics(side)
            except Exception as error:  # e.g. no DescribeConfigs ACL: said, and the watch goes on
                _log.warning("ordo's control topics were not checked: %s", error)
        if not side.registry.catch_up(side.timeout):
            raise TimeoutError(f"the producer registry is not read to its end: {side.registry.describe()}")
        if not side.epochs.catch_up(side.timeout):
            raise TimeoutError(f"the epoch log is not read to its end: {side.epochs.describe()}")
        counts = side.registry.counts()
        histories = side.epochs.histories()
        brokers = side.partition_counts()
        for topic in sorted(set(counts) | set(histories)):
            history, broker = histories.get(topic), brokers.get(topic)
            in_flight = self.in_flight(topic)
            self._sweep(side, topic, in_flight)
            view = TopicView(topic, broker, history, counts.get(topic, {}), in_flight)
            verdict = judge_topic(view)
            if verdict is None:
                continue
            if verdict.record is not None and side.record_first(verdict.record):
                _log.info("%s: recorded epoch 0 with %d partitions", topic, verdict.record.active.partitions)
            known = history or verdict.record
            outside = (broker or 0) - known.active.partitions if known is not None else 0
            metrics.TOPIC_PARTITIONS_OUTSIDE_EPOCHS.labels(topic).set(max(0, outside))
            self._say(verdict)
        for topic in sorted(side.epochs.stale_tails()):
            newest = side.epochs.history(topic)
            if newest is not None:  # written again: a refused record must not be the last one
                side.write_history(newest)

    def _sweep(self, side: KafkaSide, topic: str, in_flight: bool) -> None:
        """Abort the topic's fence once it is an orphan for ``orphan_fence_seconds``."""
        history = side.epochs.history(topic)
        epoch = history.current.epoch if history is not None and history.fencing else None
        for key in [k for k in self.orphaned if k[:2] == (id(side), topic) and (k[2] != epoch or in_flight)]:
            del self.orphaned[key]  # concluded, or an expansion drives it
        if epoch is None or in_flight:
            return
        since = self.orphaned.setdefault((id(side), topic, epoch), time.monotonic())
        grace = self.settings.orphan_fence_seconds
        found = orphan_fence(topic, history, False, time.monotonic() - since, grace)
        if found is None:
            return
        side.write_history(found.aborted)
        del self.orphaned[(id(side), topic, epoch)]
        metrics.ORPHAN_FENCES_ABORTED.inc()
        _log.warning("%s", found.message)
        post_operator_event("OrphanFenceAborted", found.message, "Warning")

    def check_control_topics(self, side: KafkaSide) -> None:
        """Warn (log, Event, gauge) about control topics replicated below what the cluster allows."""
        names = [self.settings.epoch_topic, self.settings.registry_topic, DEFAULT_CHECKPOINT_TOPIC]
        brokers, views = control_topic_views(side.admin, names, side.timeout)
        warnings = judge_control_topics(brokers, views)
        for view in views:
            for setting in ("replication.factor", "min.insync.replicas"):
                below = any(w.topic == view.topic and w.setting == setting for w in warnings)
                metrics.CONTROL_TOPIC_BELOW_RECOMMENDED.labels(view.topic, setting).set(1 if below else 0)
        for warning in warnings:
            _log.warning("%s", warning.message)
            post_operator_event("ControlTopicDurability", warning.message, "Warning")

    def _say(self, verdict: TopicVerdict) -> None:
        """A log line and an Event when the verdict changed (an in-sync topic first seen is no news)."""
        now = (verdict.in_sync, verdict.message)
        before = self.said.get(verdict.topic)
        self.said[verdict.topic] = now
        if before == now or (before is None and verdict.in_sync):
            return
        if verdict.in_sync:
            _log.info("%s", verdict.message)
        else:
            _log.warning("%s", verdict.message)
        post_operator_event(verdict.reason, verdict.message, "Normal" if verdict.in_sync else "Warning")


def control_topic_views(
    admin: AdminClient, names: list[str], timeout: float
) -> tuple[int, list[ControlTopicView]]:
    """The cluster's broker count, and each of these topics that exists: its replication factor
    and effective min.insync.replicas (its own, or the broker default it takes)."""
    metadata = admin.list_topics(timeout=timeout)
    present = [n for n in dict.fromkeys(names) if n in metadata.topics and metadata.topics[n].error is None]
    if not present:
        return len(metadata.brokers), []
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in present]
    described = admin.describe_configs(resources, request_timeout=timeout)
    views = []
    for resource, future in described.items():
        entries = future.result(timeout)
        min_insync = entries.get("min.insync.replicas")
        partitions = metadata.topics[resource.name].partitions
        replication = len(partitions[0].replicas) if 0 in partitions else 0
        insync = int(min_insync.value) if min_insync is not None and min_insync.value else 1
        views.append(ControlTopicView(resource.name, replication, insync))
    return len(metadata.brokers), sorted(views, key=lambda v: v.topic)
