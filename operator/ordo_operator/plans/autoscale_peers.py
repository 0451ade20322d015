"""A TopicAutoscaler among the topic's other resources (pure): which of two autoscalers of one
topic decides, when the topic's last expansion ended (whoever created it), which expansions to
leave to finish when the autoscaler is deleted, and when its connection is resolved again."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from .autoscaler_status import ENDED

__all__ = [
    "RESOLVE_EVERY_SECONDS",
    "AutoscalerEntry",
    "ExpansionEntry",
    "expansion_ended_at",
    "last_end",
    "resolve_due",
    "rival",
    "to_release",
]

RESOLVE_EVERY_SECONDS = 60.0
"""A connection with Secrets is read again this often (a rotated Secret is taken within it)."""

AutoscalerEntry = tuple[str, str, str]
"""An autoscaler of a topic: its namespace/name, creationTimestamp, and Kafka (bootstrap servers,
"" for the operator's default)."""
ExpansionEntry = tuple[str, str, str, str]
"""An expansion of a topic in kopf's index: namespace/name, phase, creationTimestamp, and when it
ended (RFC 3339, "" while it has not or when its status does not say)."""


def rival(entries: Iterable[AutoscalerEntry], me: AutoscalerEntry) -> str | None:
    """The autoscaler of the same topic and Kafka that decides instead of ``me``: the oldest by
    creationTimestamp (ties by name), when that is not ``me``; None when ``me`` decides."""
    same = [e for e in entries if e[2] == me[2]]
    oldest = min([*same, me], key=lambda e: (e[1], e[0]))
    return None if oldest[0] == me[0] else oldest[0]


def expansion_ended_at(status: Mapping[str, Any]) -> datetime | None:
    """When an ended expansion ended, by its own status: its start plus its duration (the operator
    writes both), else its newest condition transition; None while it runs or when nothing says."""
    if status.get("phase") not in ENDED:
        return None
    started, took = _moment(status.get("startedAt")), status.get("durationSeconds")
    if started is not None and isinstance(took, int | float):
        return started + timedelta(seconds=float(took))
    moments = [_moment(c.get("lastTransitionTime")) for c in status.get("conditions") or []]
    return max((m for m in moments if m is not None), default=None)


def last_end(entries: Iterable[ExpansionEntry]) -> datetime | None:
    """When the newest of the topic's ended expansions ended (those whose status says when)."""
    ends = [_moment(ended) for _, phase, _, ended in entries if phase in ENDED]
    return max((e for e in ends if e is not None), default=None)


def to_release(expansions: Iterable[Mapping[str, Any]], owner_uid: str) -> list[tuple[str, str, list[Any]]]:
    """The expansions a deleted autoscaler leaves to finish: those it owns that have not ended, each
    as (name, resourceVersion, its ownerReferences without the autoscaler). Ended ones stay owned:
    the garbage collector deletes them, which undoes nothing."""
    released = []
    for expansion in expansions:
        meta = expansion.get("metadata") or {}
        owners = list(meta.get("ownerReferences") or [])
        kept = [o for o in owners if o.get("uid") != owner_uid]
        phase = (expansion.get("status") or {}).get("phase", "Pending")
        if len(kept) < len(owners) and phase not in ENDED:
            released.append((str(meta.get("name")), str(meta.get("resourceVersion", "")), kept))
    return released


def resolve_due(resolved: tuple[str, float] | None, connection: str, now: float) -> bool:
    """Whether to resolve the connection (read its Secrets) again: never resolved, the spec's
    connection changed, or ``RESOLVE_EVERY_SECONDS`` passed since (``resolved``: the connection
    resolved and when, on a monotonic clock)."""
    return resolved is None or resolved[0] != connection or now - resolved[1] >= RESOLVE_EVERY_SECONDS


def _moment(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
