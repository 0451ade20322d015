"""The workload's record format: every value says which key it belongs to and its place in order."""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["Numbered", "decode", "encode", "key_name"]


@dataclass(frozen=True)
class Numbered:
    key: str
    seq: int


def key_name(producer: int, index: int) -> str:
    """Keys are disjoint per producer, so each key's order is defined by one producer."""
    return f"p{producer}-k{index}"


def encode(record: Numbered) -> bytes:
    return json.dumps({"k": record.key, "s": record.seq}, separators=(",", ":")).encode()


def decode(value: bytes) -> Numbered:
    """A keyed producer's record, or a ProducerGroup member's (``group_member``: key ``src-<p>``,
    numbered by its source record), so the same consumer and verifier check both."""
    data = json.loads(value)
    if "k" not in data and "p" in data:
        return Numbered(f"src-{data['p']}", int(data["seq"]))
    return Numbered(str(data["k"]), int(data["s"]))
