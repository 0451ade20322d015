"""Where the verifier finds a record's key and its per-key sequence number (pure).

A layout names them; ``ordo verify`` builds one from its options:

- ``JsonFields("customer", "order_no")`` (``--key-field customer --seq-field order_no``): the value
  is a JSON object; the key is one field (any JSON value, as text), the number another (an integer,
  or a string of digits). A dotted name reaches into nested objects (``order.id``).
- ``KafkaKey(seq_header="seq")`` (``--seq-header seq``): the Kafka record key is the key, a header
  holds the number (decimal text); with ``seq_field`` the number comes from the JSON value instead.
- ``KafkaKey()`` (``--seq-offset``): the Kafka record key, and no numbers: each key's records in
  storage order. Loss and duplicates cannot be told then; what is checked is that each key stays in
  one partition per epoch (the partitioning an expansion must keep).
- ``AnyOf(...)``: the first of several layouts that reads a record (other distributions name
  theirs through the entry point group ``ordo.record_formats``: ordo's test harness its own).

``why_unreadable`` looks at records no layout read and says what they hold and which options
would point the verifier at them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "AnyOf",
    "JsonFields",
    "KafkaKey",
    "RawRecord",
    "RecordLayout",
    "why_unreadable",
]


@dataclass(frozen=True)
class RawRecord:
    """One stored record, as the Kafka client returned it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class RecordLayout(Protocol):
    @property
    def numbered(self) -> bool:
        """Whether records carry per-key numbers (without them: storage order, placement only)."""
        ...

    def read(self, record: RawRecord) -> tuple[str, int] | None:
        """(key, number) of the record, or None when it is not in this layout."""
        ...

    def describe(self) -> str:
        """What the layout expects, for the user."""
        ...


def _field(data: Any, name: str) -> Any:
    for part in name.split("."):
        if not isinstance(data, dict) or part not in data:
            raise KeyError(name)
        data = data[part]
    return data


def _number(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(value)
    return int(value)


def _json_object(value: bytes | None) -> dict[str, Any] | None:
    try:
        data = json.loads(value or b"")
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _text(key: Any) -> str:
    return key if isinstance(key, str) else json.dumps(key)


@dataclass(frozen=True)
class JsonFields:
    key_field: str
    seq_field: str
    key_prefix: str = ""
    numbered: bool = True

    def read(self, record: RawRecord) -> tuple[str, int] | None:
        data = _json_object(record.value)
        if data is None:
            return None
        try:
            key = self.key_prefix + _text(_field(data, self.key_field))
            return key, _number(_field(data, self.seq_field))
        except (KeyError, TypeError, ValueError):
            return None

    def describe(self) -> str:
        return f'JSON values {{"{self.key_field}": key, "{self.seq_field}": n, ...}}'


@dataclass(frozen=True)
class KafkaKey:
    seq_header: str | None = None
    seq_field: str | None = None

    @property
    def numbered(self) -> bool:
        return self.seq_header is not None or self.seq_field is not None

    def read(self, record: RawRecord) -> tuple[str, int] | None:
        if record.key is None:
            return None
        key = record.key.decode("utf-8", errors="backslashreplace")
        try:
            if self.seq_header is not None:
                value = next(v for name, v in record.headers if name == self.seq_header)
                return key, int((value or b"").decode())
            if self.seq_field is not None:
                data = _json_object(record.value)
                return (key, _number(_field(data, self.seq_field))) if data is not None else None
        except (StopIteration, KeyError, TypeError, ValueError, UnicodeDecodeError):
            return None
        return key, record.offset

    def describe(self) -> str:
        if self.seq_header is not None:
            return f"the Kafka record key, and the number in header {self.seq_header!r}"
        if self.seq_field is not None:
            return f'the Kafka record key, and the number in JSON values {{"{self.seq_field}": n, ...}}'
        return "the Kafka record key, in storage order (no numbers)"


@dataclass(frozen=True)
class AnyOf:
    layouts: tuple[RecordLayout, ...]

    @property
    def numbered(self) -> bool:
        return all(layout.numbered for layout in self.layouts)

    def read(self, record: RawRecord) -> tuple[str, int] | None:
        for layout in self.layouts:
            found = layout.read(record)
            if found is not None:
                return found
        return None

    def describe(self) -> str:
        return "; or ".join(layout.describe() for layout in self.layouts)


HOW_TO_POINT = (
    "--key-field FIELD --seq-field FIELD (JSON values: which field is the key and which the per-key "
    "number), or the Kafka record key with --seq-header NAME (the number in a header), --seq-field "
    "FIELD alone, or --seq-offset (no numbers: each key's partition per epoch only)"
)


def why_unreadable(samples: Sequence[RawRecord], layout: RecordLayout | None) -> str:
    """What the records no layout read look like, what was expected, and the options that would
    read them (a guess at the fields when the values are JSON objects)."""
    expected = f"it reads {layout.describe()}" if layout is not None else "no record format was given"
    if not samples:
        return f"{expected}. Point it at your records' fields: {HOW_TO_POINT}."
    first = samples[0]
    data = _json_object(first.value)
    if data is not None:
        shape = f"JSON objects with fields {', '.join(sorted(data))}"
    else:
        shown = (first.value or b"")[:60]
        shape = f"values that are not JSON objects (e.g. {shown!r})"
    has_key = any(s.key is not None for s in samples)
    headers = sorted({name for s in samples for name, _ in s.headers})
    shape += "; with a Kafka record key" if has_key else "; without a Kafka record key"
    if headers:
        shape += f"; headers {', '.join(headers)}"
    guess = _guess(samples, data, has_key, headers)
    hint = f" This would read them: {guess}." if guess else ""
    return (
        f"{expected}; records here are {shape} (p{first.partition}@{first.offset})."
        f"{hint} Point it at your records' fields: {HOW_TO_POINT}."
    )


def _guess(
    samples: Sequence[RawRecord], data: dict[str, Any] | None, has_key: bool, headers: list[str]
) -> str | None:
    """Options that read every sample, when some obvious choice does."""
    objects = [_json_object(s.value) for s in samples]
    if data is not None and all(o is not None for o in objects):
        numbers = [n for n in data if all(_is_number(o, n) for o in objects if o is not None)]
        keys = [n for n in data if n not in numbers and isinstance(data[n], str)]
        seq = next((n for n in numbers if any(w in n.lower() for w in ("seq", "version", "no", "num"))), None)
        if seq is not None and keys:
            return f"--key-field {keys[0]} --seq-field {seq}"
        if seq is not None and has_key:
            return f"--seq-field {seq}"
    if has_key:
        for name in headers:
            if all(_header_number(s, name) for s in samples):
                return f"--seq-header {name}"
        return "--seq-offset"
    return None


def _is_number(data: dict[str, Any], name: str) -> bool:
    try:
        _number(data[name])
    except (KeyError, TypeError, ValueError):
        return False
    return True


def _header_number(record: RawRecord, name: str) -> bool:
    values = [v for n, v in record.headers if n == name]
    return bool(values) and (values[0] or b"").decode(errors="replace").isdigit()
