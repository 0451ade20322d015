"""Pods and Leases, as kube-apiserver sends them (JSON objects), to the views a pass reads, pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ordo.member_wire import ACK_ANNOTATION, ASSIGNMENT_ANNOTATION

from .group import LeaseView, PodView
from .watch_cache import Listed, revision_of

__all__ = ["lease_listed", "pod_listed"]


def pod_listed(pod: Mapping[str, Any]) -> Listed[PodView]:
    meta, status = pod["metadata"], pod.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    view = PodView(
        name=meta["name"],
        ready=conditions.get("Ready") == "True",
        deleting=meta.get("deletionTimestamp") is not None,
        assignment=(meta.get("annotations") or {}).get(ASSIGNMENT_ANNOTATION),
    )
    return Listed(
        meta["name"], dict(meta.get("labels") or {}), revision_of(meta.get("resourceVersion")), view
    )


def _seconds(value: Any) -> float | None:
    """A Lease's ``leaseDurationSeconds`` (an integer by the API's schema; anything else: unknown)."""
    return (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None
    )


def lease_listed(lease: Mapping[str, Any]) -> Listed[LeaseView]:
    meta, spec = lease["metadata"], lease.get("spec") or {}
    acked = (meta.get("annotations") or {}).get(ACK_ANNOTATION)
    renewed = spec.get("renewTime")
    view = LeaseView(
        name=meta["name"],
        holder=spec.get("holderIdentity"),
        renewed=datetime.fromisoformat(renewed) if renewed else None,
        acked=int(acked) if acked is not None and acked.lstrip("-").isdigit() else None,
        duration=_seconds(spec.get("leaseDurationSeconds")),
    )
    return Listed(
        meta["name"], dict(meta.get("labels") or {}), revision_of(meta.get("resourceVersion")), view
    )
