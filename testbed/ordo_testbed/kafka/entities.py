"""Generic helpers over kio's generated dataclasses: blank entities, and the per-partition split
and merge the fault proxy needs to answer some partitions of a request with an error."""

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


def field_names(cls: type[Any]) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


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


@dataclass(frozen=True)
class Shape:
    """Field names of a request/response pair listing topics and their partitions. A topic is
    named by ``*_topic`` or, from the versions that use topic ids, by ``topic_id``."""

    req_topics: str
    req_topic: str
    req_parts: str
    req_part: str
    resp_topics: str
    resp_topic: str
    resp_parts: str
    resp_part: str
    error_values: tuple[tuple[str, Any], ...] = ()


TopicKey = str | uuid.UUID
Names = dict[uuid.UUID, str]


def topic_key(entity: Any, name_field: str) -> TopicKey:
    """The topic's name, or its id where this version names topics by id."""
    if hasattr(entity, "topic_id"):
        key: TopicKey = entity.topic_id
        return key
    name: str = getattr(entity, name_field)
    return name


def topic_ids(payload: Any, shape: Shape) -> set[uuid.UUID]:
    keys = (topic_key(t, shape.req_topic) for t in getattr(payload, shape.req_topics) or ())
    return {k for k in keys if isinstance(k, uuid.UUID)}


def _name(key: TopicKey, names: Names) -> str:
    return names.get(key, str(key)) if isinstance(key, uuid.UUID) else key


def pairs(payload: Any, shape: Shape, names: Names) -> list[tuple[str, int | None]]:
    return [
        (_name(topic_key(t, shape.req_topic), names), int(getattr(p, shape.req_part)))
        for t in getattr(payload, shape.req_topics) or ()
        for p in getattr(t, shape.req_parts) or ()
    ]


Rejected = dict[tuple[TopicKey, int], ErrorCode]


def split(
    payload: Any, shape: Shape, names: Names, verdict: Callable[[str, int], ErrorCode | None]
) -> tuple[Any, Rejected, bool]:
    """Remove partitions ``verdict`` rejects; returns (payload, rejected, anything left)."""
    rejected: Rejected = {}
    topics = []
    for topic in getattr(payload, shape.req_topics) or ():
        key = topic_key(topic, shape.req_topic)
        kept = []
        for part in getattr(topic, shape.req_parts) or ():
            index = int(getattr(part, shape.req_part))
            error = verdict(_name(key, names), index)
            if error is None:
                kept.append(part)
            else:
                rejected[(key, index)] = error
        if kept:
            topics.append(dataclasses.replace(topic, **{shape.req_parts: tuple(kept)}))
    if not rejected:
        return payload, rejected, True
    return dataclasses.replace(payload, **{shape.req_topics: tuple(topics)}), rejected, bool(topics)


def merge(response: Any, shape: Shape, rejected: Rejected) -> Any:
    """Answer every rejected (topic, partition) of a response with its error (replacing whatever
    the broker said of it: a fetch session can return partitions the request did not name)."""
    if not rejected:
        return response
    topic_cls = element_type(type(response), shape.resp_topics)
    part_cls = element_type(topic_cls, shape.resp_parts)
    key_field = "topic_id" if "topic_id" in field_names(topic_cls) else shape.resp_topic
    extra = dict(shape.error_values)
    by_topic: dict[TopicKey, list[Any]] = {}
    for (key, index), error in rejected.items():
        by_topic.setdefault(key, []).append(
            blank(part_cls, **{shape.resp_part: index, "error_code": error}, **extra)
        )
    topics = []
    for topic in getattr(response, shape.resp_topics):
        key = topic_key(topic, shape.resp_topic)
        added = by_topic.pop(key, [])
        if added:
            gone = {int(getattr(p, shape.resp_part)) for p in added}
            kept = tuple(
                p for p in getattr(topic, shape.resp_parts) if int(getattr(p, shape.resp_part)) not in gone
            )
            topic = dataclasses.replace(topic, **{shape.resp_parts: kept + tuple(added)})
        topics.append(topic)
    for key, added in by_topic.items():
        topics.append(blank(topic_cls, **{key_field: key, shape.resp_parts: tuple(added)}))
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
SHAPES: dict[int, Shape] = {0: PRODUCE, 1: FETCH, 2: LIST_OFFSETS}
