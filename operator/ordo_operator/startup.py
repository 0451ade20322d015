"""Operator-wide kopf settings and handler registration."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from ordo.member_wire import GROUP_LABEL

from . import expansions, finalizers, producer_groups
from .config import OperatorConfig
from .topics import TopicWatch

__all__ = ["register_all"]


def register_all(config: OperatorConfig) -> None:
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

    watch = TopicWatch(config, expansions.expanding)

    @kopf.on.startup()
    def watch_topics(**_: Any) -> None:
        watch.start()

    @kopf.on.cleanup()
    def stop_watching_topics(**_: Any) -> None:
        watch.stop()

    expansions.register(config)
    producer_groups.register(config)
    finalizers.register([expansions.PLURAL, producer_groups.PLURAL])
