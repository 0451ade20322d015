"""Operator-wide kopf settings and handler registration."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from ordo.member_wire import GROUP_LABEL

from . import autoscalers, expansions, finalizers, producer_groups
from .config import OperatorConfig
from .replicas import Replica
from .topics import TopicWatch

__all__ = ["register_all"]

_Index = kopf.Index[str, tuple[str, str, str, str]]


def register_all(config: OperatorConfig, replica: Replica | None = None) -> None:
    """``replica``: this process among the operator's replicas (None: the only one)."""

    @kopf.on.startup()
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        # kopf's bookkeeping goes into annotations: our status schemas are strict and would prune it
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="kopf.ordo.dev")
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix="kopf.ordo.dev", key="last-handled-configuration"
        )
        settings.persistence.finalizer = finalizers.FINALIZER
        settings.posting.level = logging.WARNING  # Events come from our handlers, not from every log line
        settings.watching.server_timeout = 60
        # Only member pods (labelled with their group) reach the operator: the API server filters
        # the pod watch, so unrelated pods cost neither memory nor events (docs/reliability.md).
        settings.watching.label_selectors["", "v1", "pods"] = GROUP_LABEL
        settings.networking.request_timeout = 30
        settings.execution.max_workers = config.max_workers  # a thread per live group (config.py)
        # how soon a standby takes over from a replica that died without a word (kill -9)
        settings.peering.lifetime = config.peering_lifetime_seconds

    listed: list[_Index] = []  # kopf's index of expansions, given to startup handlers

    def in_flight(topic: str) -> bool:
        index = listed[0] if listed else None
        return expansions.expanding(topic) or expansions.listed_in_flight(index, topic)

    watch = TopicWatch(config, in_flight, replica)

    @kopf.on.startup()  # type: ignore[arg-type]
    def watch_topics(expansions_by_topic: _Index, **_: Any) -> None:
        listed.append(expansions_by_topic)  # a live view: kopf keeps it up to date
        watch.start()

    @kopf.on.cleanup()
    def stop_watching_topics(**_: Any) -> None:
        watch.stop()

    expansions.register(config)
    autoscalers.register(config)
    producer_groups.register(config)
    finalizers.register([expansions.PLURAL, producer_groups.PLURAL])
