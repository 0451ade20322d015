"""Fault injection rules: delay, drop the connection, or answer an error, per API/topic/partition."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

_API_BY_NAME = {name.replace("_", ""): key for key, name in api_key_map.items()}


def api_key_of(api: str | int) -> int:
    """Accept 16, "Produce", "produce", "list_offsets", "ListOffsets", "LIST_OFFSETS"."""
    if isinstance(api, int):
        return api
    try:
        return _API_BY_NAME[api.replace("_", "").lower()]
    except KeyError:
        raise ValueError(f"unknown Kafka API {api!r}") from None


def error_code_of(error: ErrorCode | str | int) -> ErrorCode:
    if isinstance(error, ErrorCode):
        return error
    if isinstance(error, int):
        return ErrorCode(error)
    return ErrorCode[error.lower()]


@dataclass
class Fault:
    """One rule. Exactly one effect: ``delay`` seconds, ``drop`` the connection, ``error`` code, or
    ``late``: the request takes effect and its answer comes that many seconds later (a client
    whose request timed out although the broker did what it asked).

    ``count`` limits it to that many matching requests, ``duration`` to that many seconds after
    it is added; with neither it lasts until removed. A request matches when its API matches and,
    if given, it names ``topic`` (and ``partition``).
    """

    api: str | int
    topic: str | None = None
    partition: int | None = None
    error: ErrorCode | str | int | None = None
    delay: float | None = None
    drop: bool = False
    late: float | None = None
    count: int | None = None
    duration: float | None = None
    id: int = field(default=0, compare=False)
    hits: int = field(default=0, compare=False)
    _api_key: int = field(default=-1, init=False, repr=False, compare=False)
    _error: ErrorCode | None = field(default=None, init=False, repr=False, compare=False)
    _expires: float | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._api_key = api_key_of(self.api)
        self._error = None if self.error is None else error_code_of(self.error)
        effects = sum(x is not None for x in (self.error, self.delay, self.late)) + bool(self.drop)
        if effects != 1:
            raise ValueError("a Fault needs exactly one of error=, delay=, drop=True, late=")
        if self.partition is not None and self.topic is None:
            raise ValueError("partition= needs topic=")

    @property
    def api_key(self) -> int:
        return self._api_key

    @property
    def error_code(self) -> ErrorCode | None:
        return self._error

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if not k.startswith("_")}
        data["error"] = None if self._error is None else self._error.name
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fault:
        allowed = {"api", "topic", "partition", "error", "delay", "drop", "late", "count", "duration"}
        return cls(**{k: v for k, v in data.items() if k in allowed})


TopicPartitions = Iterable[tuple[str, int | None]]


class FaultSet:
    """Thread-safe: tests add rules from their own thread while the proxy's loop consumes them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)
        self._apis: frozenset[int] = frozenset()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            fault.id = next(self._ids)
            fault.hits = 0
            if fault.duration is not None:
                fault._expires = time.monotonic() + fault.duration
            self._faults.append(fault)
            self._apis = frozenset(f.api_key for f in self._faults)
        return fault

    def remove(self, fault_id: int) -> None:
        with self._lock:
            self._faults = [f for f in self._faults if f.id != fault_id]
            self._apis = frozenset(f.api_key for f in self._faults)

    def clear(self) -> None:
        with self._lock:
            self._faults = []
            self._apis = frozenset()

    def snapshot(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    def watches(self, api_key: int) -> bool:
        """Cheap pre-check so requests of unwatched APIs are never parsed for faults."""
        return api_key in self._apis

    def take(self, api_key: int, targets: TopicPartitions) -> list[tuple[Fault, set[tuple[str, int]]]]:
        """Rules hit by one request, each with the (topic, partition) pairs it hits (empty: whole
        request). Counts are consumed here, once per request."""
        pairs = list(targets)
        now = time.monotonic()
        hit: list[tuple[Fault, set[tuple[str, int]]]] = []
        with self._lock:
            for fault in self._faults:
                if fault.api_key != api_key or (fault._expires is not None and now >= fault._expires):
                    continue
                if fault.topic is None:
                    matched: set[tuple[str, int]] = set()
                else:
                    matched = {
                        (t, p)
                        for t, p in pairs
                        if t == fault.topic
                        and p is not None
                        and (fault.partition is None or p == fault.partition)
                    }
                    topic_level = any(t == fault.topic and p is None for t, p in pairs)
                    if not matched and not topic_level:
                        continue
                fault.hits += 1
                hit.append((fault, matched))
            self._faults = [
                f
                for f in self._faults
                if (f.count is None or f.hits < f.count) and (f._expires is None or now < f._expires)
            ]
            self._apis = frozenset(f.api_key for f in self._faults)
        return hit
