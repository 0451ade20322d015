"""The independent verifier: reads what producers delivered and what consumers processed (their
own logs, in processing order, stamped with the machine's monotonic clock) and counts loss,
duplicates and per-key order violations. It shares no code with what it checks but the record
format."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ordo.verify import KeyOrder

__all__ = [
    "KeyOrder",
    "Processed",
    "Verdict",
    "read_acknowledged",
    "read_delivered",
    "read_processed",
    "verify",
]


@dataclass(frozen=True, order=True)
class Processed:
    at_ns: int
    consumer: str
    key: str
    seq: int
    partition: int
    offset: int


@dataclass
class Verdict:
    delivered: int = 0
    processed: int = 0
    duplicates: int = 0
    lost: int = 0
    order_violations: int = 0
    examples: list[str] = field(default_factory=list)
    missing: list[tuple[str, int]] = field(default_factory=list)
    """The first few (key, number) never processed: where they sit tells why."""

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.order_violations == 0

    def summary(self) -> str:
        return (
            f"delivered {self.delivered}, processed {self.processed}, duplicates {self.duplicates}, "
            f"lost {self.lost}, order violations {self.order_violations}"
            + (f" (never processed: {_pairs(self.missing)})" if self.missing else "")
        )


def _pairs(pairs: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{key} #{seq}" for key, seq in pairs)


def read_delivered(paths: Iterable[Path]) -> dict[str, int]:
    """key → number of records delivered (seq 0..n-1), from producers' logs ("key seq ..." lines)."""
    highest: dict[str, int] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            key, seq = line.split()[:2]
            highest[key] = max(highest.get(key, -1), int(seq))
    return {key: top + 1 for key, top in highest.items()}


def read_acknowledged(paths: Iterable[Path]) -> dict[tuple[str, int], str]:
    """(key, seq) → where the broker's acknowledgement put it ("p3@812"), for every record a
    producer's log lists with a partition and offset; a seq below a key's highest that is absent
    here was never acknowledged."""
    acknowledged: dict[tuple[str, int], str] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4:
                acknowledged[(parts[0], int(parts[1]))] = f"p{parts[2]}@{parts[3]}"
    return acknowledged


def read_processed(path: Path) -> Iterator[Processed]:
    """A consumer's log: "at_ns key seq partition offset" lines, in processing order (none when
    it has none: a consumer killed before it processed a record never wrote one)."""
    consumer = path.stem
    if not path.exists():
        return
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 5:  # a line cut short by a kill is not a processed record
            yield Processed(int(parts[0]), consumer, parts[1], int(parts[2]), int(parts[3]), int(parts[4]))


def verify(delivered: dict[str, int], consumer_logs: Iterable[Path]) -> Verdict:
    """Merge the consumers' logs by time and check every key (see :class:`KeyOrder`)."""
    check = KeyOrder()
    for record in heapq.merge(*(read_processed(p) for p in consumer_logs)):
        check.add(record.key, record.seq, f"p{record.partition}@{record.offset} by {record.consumer}")
    return Verdict(
        delivered=sum(delivered.values()),
        processed=check.records,
        duplicates=check.duplicates,
        lost=check.lost(delivered),
        missing=check.missing(delivered, 10),
        order_violations=check.order_violations,
        examples=check.examples,
    )
