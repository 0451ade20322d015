"""Label and field selectors, parsed once per request and matched per object."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ApiError, bad_request

JSON = dict[str, Any]

# One requirement: key, then an operator, then values; "in (a,b)" lists may contain commas,
# so the selector is tokenised rather than split on commas.
_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[^\s!=(),]+)")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" also match objects without the label, as on the real server.
        return not present or labels[self.key] not in self.values


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # pragma: no cover - the pattern matches any non-empty rest
            raise bad_request(f"unable to parse requirement: {text!r}")
        out.append(m.group(1))
        pos = m.end()
    return out


def parse_labels(text: str | None) -> list[Requirement]:
    """Parse a ``labelSelector`` (``a=b,c!=d,e in (x,y),f notin (z),g,!h``)."""
    if not text or not text.strip():
        return []
    toks = _tokens(text)
    reqs: list[Requirement] = []
    i = 0

    def fail(why: str) -> ApiError:
        return bad_request(f"unable to parse requirement: {why}")

    while i < len(toks):
        if toks[i] == "!":
            if i + 1 >= len(toks):
                raise fail("missing key after '!'")
            reqs.append(Requirement(toks[i + 1], "!exists"))
            i += 2
        else:
            key = toks[i]
            i += 1
            op = toks[i] if i < len(toks) else ","
            if op == ",":
                reqs.append(Requirement(key, "exists"))
            elif op in ("=", "==", "!="):
                if i + 1 >= len(toks) or toks[i + 1] in (",", "(", ")"):
                    value = ""
                    i += 1
                else:
                    value = toks[i + 1]
                    i += 2
                reqs.append(Requirement(key, "!=" if op == "!=" else "=", frozenset({value})))
            elif op in ("in", "notin"):
                if i + 1 >= len(toks) or toks[i + 1] != "(":
                    raise fail(f"expected '(' after {op} for key {key!r}")
                i += 2
                values: set[str] = set()
                while i < len(toks) and toks[i] != ")":
                    if toks[i] != ",":
                        values.add(toks[i])
                    i += 1
                if i >= len(toks):
                    raise fail(f"missing ')' for key {key!r}")
                i += 1
                reqs.append(Requirement(key, op, frozenset(values)))
            else:
                raise fail(f"unexpected {op!r} after key {key!r}")
        if i < len(toks):
            if toks[i] != ",":
                raise fail(f"expected ',' but found {toks[i]!r}")
            i += 1
    return reqs


def lookup(obj: JSON, path: str) -> str | None:
    """A dotted field of an object as the string a field selector compares with."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    if cur is None or isinstance(cur, dict | list):
        return None
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


@dataclass(frozen=True)
class FieldRequirement:
    path: str
    value: str
    negate: bool

    def matches(self, obj: JSON) -> bool:
        return ((lookup(obj, self.path) or "") == self.value) != self.negate


def parse_fields(text: str | None, supported: Mapping[str, str]) -> list[FieldRequirement]:
    """Parse a ``fieldSelector``; ``supported`` maps selector labels to object paths."""
    if not text or not text.strip():
        return []
    reqs: list[FieldRequirement] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*([^!=\s]+)\s*(!=|==|=)\s*(.*?)\s*", part)
        if m is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        label, op, value = m.groups()
        if label not in supported:
            raise bad_request(f"field label not supported: {label}")
        reqs.append(FieldRequirement(supported[label], value, op == "!="))
    return reqs


Matcher = Callable[[JSON], bool]


def matcher(label_selector: str | None, field_selector: str | None, supported: Mapping[str, str]) -> Matcher:
    """One predicate for both selectors; cheap when both are empty."""
    labels = parse_labels(label_selector)
    fields = parse_fields(field_selector, supported)
    if not labels and not fields:
        return lambda obj: True

    def match(obj: JSON) -> bool:
        obj_labels = obj.get("metadata", {}).get("labels") or {}
        return all(r.matches(obj_labels) for r in labels) and all(f.matches(obj) for f in fields)

    return match
