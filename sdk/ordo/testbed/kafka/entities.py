"""Generic helpers over kio's generated dataclasses: blank entities and per-partition split/merge."""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

_ZERO_BY_KAFKA_TYPE: dict[str, Any] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint8": 0,
    "uint16": 0,
    "uint32": 0,
    "uint64": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": None,
    "bool": False,
    "uuid": uuid.UUID(int=0),
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.UTC),
}


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def element_type(cls: type[Any], field_name: str) -> type[Any]:
    """The entity type held by a ``tuple[Entity, ...]`` (possibly ``| None``) field."""
    hint = _hints(cls)[field_name]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    inner: type[Any] = typing.get_args(hint)[0]
    return inner


def blank(cls: type[Any], **values: Any) -> Any:
    """An instance of ``cls`` with ``values`` and a zero value for every other required field."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in values or f.default is not dataclasses.MISSING:
            continue
        if f.default_factory is not dataclasses.MISSING:
            continue
        hint = _hints(cls)[f.name]
        args = typing.get_args(hint)
        if type(None) in args:
            kwargs[f.name] = None
        elif "kafka_type" in f.metadata and typing.get_origin(hint) is not tuple:
            kwargs[f.name] = _ZERO_BY_KAFKA_TYPE[f.metadata["kafka_type"]]
        elif typing.get_origin(hint) is tuple:
            kwargs[f.name] = ()
        else:
            kwargs[f.name] = blank(hint)
    kwargs.update(values)
    return cls(**kwargs)


def fit(cls: type[Any], **values: Any) -> Any:
    """``blank(cls, ...)`` with only the values this version of ``cls`` has; None for a field that
    cannot be null takes the field's zero value (e.g. JoinGroup v0-6 protocol_name)."""
    names = {f.name for f in dataclasses.fields(cls)}
    kept = {
        k: v
        for k, v in values.items()
        if k in names and (v is not None or type(None) in typing.get_args(_hints(cls)[k]))
    }
    return blank(cls, **kept)


@dataclass(frozen=True)
class Shape:
    """Field names of a request/response pair listing topics and their partitions."""

    req_topics: str
    req_topic: str
    req_parts: str
    req_part: str
    resp_topics: str
    resp_topic: str
    resp_parts: str
    resp_part: str
    error_values: tuple[tuple[str, Any], ...] = ()


def pairs(payload: Any, shape: Shape) -> list[tuple[str, int | None]]:
    return [
        (getattr(t, shape.req_topic), int(getattr(p, shape.req_part)))
        for t in getattr(payload, shape.req_topics) or ()
        for p in getattr(t, shape.req_parts) or ()
    ]


def split(
    payload: Any, shape: Shape, verdict: Callable[[str, int], ErrorCode | None]
) -> tuple[Any, dict[tuple[str, int], ErrorCode], bool]:
    """Remove partitions ``verdict`` rejects; returns (payload, rejected, anything left)."""
    rejected: dict[tuple[str, int], ErrorCode] = {}
    topics = []
    for topic in getattr(payload, shape.req_topics) or ():
        name = getattr(topic, shape.req_topic)
        kept = []
        for part in getattr(topic, shape.req_parts) or ():
            index = int(getattr(part, shape.req_part))
            error = verdict(name, index)
            if error is None:
                kept.append(part)
            else:
                rejected[(name, index)] = error
        if kept:
            topics.append(dataclasses.replace(topic, **{shape.req_parts: tuple(kept)}))
    if not rejected:
        return payload, rejected, True
    return dataclasses.replace(payload, **{shape.req_topics: tuple(topics)}), rejected, bool(topics)


def merge(response: Any, shape: Shape, rejected: dict[tuple[str, int], ErrorCode]) -> Any:
    """Add an error entry for every rejected (topic, partition) to a response."""
    if not rejected:
        return response
    topic_cls = element_type(type(response), shape.resp_topics)
    part_cls = element_type(topic_cls, shape.resp_parts)
    extra = dict(shape.error_values)
    by_topic: dict[str, list[Any]] = {}
    for (name, index), error in rejected.items():
        by_topic.setdefault(name, []).append(
            blank(part_cls, **{shape.resp_part: index, "error_code": error}, **extra)
        )
    topics = []
    for topic in getattr(response, shape.resp_topics):
        name = getattr(topic, shape.resp_topic)
        added = by_topic.pop(name, [])
        if added:
            parts = tuple(getattr(topic, shape.resp_parts)) + tuple(added)
            topic = dataclasses.replace(topic, **{shape.resp_parts: parts})
        topics.append(topic)
    for name, added in by_topic.items():
        topics.append(blank(topic_cls, **{shape.resp_topic: name, shape.resp_parts: tuple(added)}))
    return dataclasses.replace(response, **{shape.resp_topics: tuple(topics)})


PRODUCE = Shape(
    "topic_data", "name", "partition_data", "index", "responses", "name", "partition_responses", "index",
    (("base_offset", -1),),
)  # fmt: skip
FETCH = Shape(
    "topics", "topic", "partitions", "partition", "responses", "topic", "partitions", "partition_index",
    (("high_watermark", -1), ("last_stable_offset", -1), ("log_start_offset", -1)),
)  # fmt: skip
LIST_OFFSETS = Shape(
    "topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index",
    (("offset", -1), ("timestamp", -1)),
)  # fmt: skip
