"""Server-side printing (``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``), which is how
``kubectl get`` shows a CRD's additionalPrinterColumns."""

from __future__ import annotations

import re
import time
from calendar import timegm
from typing import Any

from .resources import ResourceType

JSON = dict[str, Any]

_STEP = re.compile(r"\.([A-Za-z0-9_-]+)|\[(\d+)\]|\[\?\(@\.([A-Za-z0-9_.-]+)\s*==\s*[\"']([^\"']*)[\"']\)\]")


def jsonpath(obj: Any, path: str) -> Any:
    """The subset of JSONPath printer columns use: ``.a.b``, ``[0]`` and ``[?(@.type=="Ready")]``."""
    path = path.strip().removeprefix("{").removesuffix("}").removeprefix("$")
    cur: Any = obj
    pos = 0
    while pos < len(path) and cur is not None:
        m = _STEP.match(path, pos)
        if m is None:
            return None
        field, index, key, value = m.groups()
        if field is not None:
            cur = cur.get(field) if isinstance(cur, dict) else None
        elif index is not None:
            cur = cur[int(index)] if isinstance(cur, list) and int(index) < len(cur) else None
        else:
            found = [x for x in cur or [] if isinstance(x, dict) and str(jsonpath(x, "." + key)) == value]
            cur = found[0] if found else None
        pos = m.end()
    return cur


def age(timestamp: str | None) -> str:
    """Go's duration.HumanDuration, coarsely: 59s, 3m, 5h, 4d."""
    if not timestamp:
        return "<unknown>"
    seconds = max(0, int(time.time() - timegm(time.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ"))))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 2 * 3600:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def table(rt: ResourceType, version: str, objects: list[JSON], resource_version: str) -> JSON:
    columns = rt.columns.get(version) or [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]
    definitions = [{"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}]
    definitions += [
        {"name": c["name"], "type": c.get("type", "string"), "format": c.get("format", ""),
         "description": c.get("description", ""), "priority": c.get("priority", 0)}
        for c in columns
    ]  # fmt: skip
    rows = []
    for obj in objects:
        cells: list[Any] = [obj["metadata"]["name"]]
        for c in columns:
            value = jsonpath(obj, c["jsonPath"])
            cells.append(age(value) if c.get("type") == "date" and isinstance(value, str) else value)
        partial = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"],
        }
        rows.append({"cells": cells, "object": partial})
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": definitions,
        "rows": rows,
    }
