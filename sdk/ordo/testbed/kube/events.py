"""core/v1 Events and events.k8s.io/v1 Events are one kind stored once (as on a real server):
objects are kept in the core shape and converted for the events.k8s.io API on the way in and out."""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]

# events.k8s.io/v1 field -> core/v1 field
_RENAMED = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_SAME = ("metadata", "eventTime", "series", "reportingInstance", "action", "reason", "related", "type")
_TO_V1 = {core: v1 for v1, core in _RENAMED.items()}

# Field selectors of events.k8s.io/v1, as paths of the stored (core) object.
SELECTABLE = {
    f"regarding.{k}": f"involvedObject.{k}" for k in ("kind", "namespace", "name", "uid", "apiVersion")
} | {
    "reason": "reason",
    "type": "type",
    "reportingController": "reportingComponent",
}


def to_v1(core: JSON, api_version: str = "events.k8s.io/v1") -> JSON:
    out: JSON = {"kind": "Event", "apiVersion": api_version}
    for k, v in core.items():
        if k in _SAME:
            out[k] = v
        elif k in _TO_V1:
            out[_TO_V1[k]] = v
    return out


def to_core(event: JSON) -> JSON:
    out: JSON = {"kind": "Event", "apiVersion": "v1"}
    for k, v in event.items():
        if k in _SAME:
            out[k] = v
        elif k in _RENAMED:
            out[_RENAMED[k]] = v
    return out
