"""The topic watch: every ``topic_check_seconds``, each topic ordo's producers write on each Kafka
cluster the operator talks to is judged (``plans.topics.judge_topic``), whether or not ordo ever
expanded it. Epoch 0 of a topic the epoch log does not know is recorded, so producers agree on
one partition count; partitions added outside ordo are said once per change: a Warning Event on
the operator's pod (``POD_NAME``/``POD_NAMESPACE``, set by the chart), a log line, and the gauge
``ordo_topic_partitions_outside_epochs``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes.client import CoreV1Api, CoreV1Event, V1EventSource, V1ObjectMeta, V1ObjectReference

from . import metrics
from .config import OperatorConfig
from .kafka import KafkaSide, clients_for, known_sides
from .kube import api_client, kafka_config
from .plans.topics import TopicVerdict, TopicView, judge_topic

__all__ = ["TopicWatch"]

_log = logging.getLogger(__name__)


class TopicWatch:
    """A thread of the operator's; ``expanding(topic)`` says whether an expansion of the topic is
    in flight (its new partitions exist before its epoch does)."""

    def __init__(self, settings: OperatorConfig, expanding: Callable[[str], bool]) -> None:
        self.settings, self.interval = settings, settings.topic_check_seconds
        self.expanding = expanding
        self.said: dict[str, tuple[bool, str]] = {}
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
        if self.settings.kafka_bootstrap:  # the default cluster, watched from the start
            try:
                clients_for(kafka_config(None, "", self.settings), self.settings)
            except Exception as error:  # unreachable now: the next turn tries again
                _log.warning("topic watch: the default Kafka: %s", error)
        for side in known_sides():
            try:
                self.check(side)
            except Exception as error:  # Kafka unreachable now: the next turn tries again
                metrics.record_error(metrics.error_kind(error))
                _log.warning("topic watch: %s", error)

    def check(self, side: KafkaSide) -> None:
        if not side.registry.catch_up(side.timeout):
            raise TimeoutError(f"the producer registry is not read to its end: {side.registry.describe()}")
        counts = side.registry.counts()
        histories = side.epochs.histories()
        brokers = side.partition_counts()
        for topic in sorted(set(counts) | set(histories)):
            history, broker = histories.get(topic), brokers.get(topic)
            view = TopicView(topic, broker, history, counts.get(topic, {}), self.expanding(topic))
            verdict = judge_topic(view)
            if verdict is None:
                continue
            if verdict.record is not None and side.record_first(verdict.record):
                _log.info("%s: recorded epoch 0 with %d partitions", topic, verdict.record.active.partitions)
            known = history or verdict.record
            outside = (broker or 0) - known.active.partitions if known is not None else 0
            metrics.TOPIC_PARTITIONS_OUTSIDE_EPOCHS.labels(topic).set(max(0, outside))
            self._say(verdict)

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
        _post_event(verdict.reason, verdict.message, "Normal" if verdict.in_sync else "Warning")


def _post_event(reason: str, message: str, kind: str) -> None:
    """An Event on the operator's own pod, when it runs in one."""
    pod, namespace = os.environ.get("POD_NAME"), os.environ.get("POD_NAMESPACE")
    if not pod or not namespace:
        return
    now = datetime.now(UTC)
    event = CoreV1Event(
        metadata=V1ObjectMeta(generate_name=f"{pod}.", namespace=namespace),
        involved_object=V1ObjectReference(api_version="v1", kind="Pod", name=pod, namespace=namespace),
        reason=reason,
        message=message[:1024],
        type=kind,
        first_timestamp=now,
        last_timestamp=now,
        count=1,
        source=V1EventSource(component="ordo-operator"),
        reporting_component="ordo-operator",
    )
    try:
        CoreV1Api(api_client()).create_namespaced_event(namespace, event)
    except Exception as error:  # the log line said it already
        _log.warning("event %s not posted: %s", reason, error)
