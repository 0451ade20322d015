"""The independent verifier: reads what producers delivered and what consumers processed (their
own logs, in processing order, stamped with the machine's monotonic clock) and counts loss,
duplicates and per-key order violations. It shares no code with what it checks but the record
format."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Processed", "Verdict", "read_delivered", "read_processed", "verify"]


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

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.order_violations == 0

    def summary(self) -> str:
        return (
            f"delivered {self.delivered}, processed {self.processed}, duplicates {self.duplicates}, "
            f"lost {self.lost}, order violations {self.order_violations}"
        )


def read_delivered(paths: Iterable[Path]) -> dict[str, int]:
    """key → number of records delivered (seq 0..n-1), from producers' logs ("key seq" lines)."""
    highest: dict[str, int] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            key, seq = line.split()
            highest[key] = max(highest.get(key, -1), int(seq))
    return {key: top + 1 for key, top in highest.items()}


def read_processed(path: Path) -> Iterator[Processed]:
    """A consumer's log: "at_ns key seq partition offset" lines, in processing order."""
    consumer = path.stem
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 5:  # a line cut short by a kill is not a processed record
            yield Processed(int(parts[0]), consumer, parts[1], int(parts[2]), int(parts[3]), int(parts[4]))


def verify(delivered: dict[str, int], consumer_logs: Iterable[Path]) -> Verdict:
    """Merge the consumers' logs by time and check every key.

    A violation is a record processed for the first time after a later record of its key was
    processed (a re-delivery after a rebalance is a duplicate, not a reordering)."""
    verdict = Verdict(delivered=sum(delivered.values()))
    seen: dict[str, set[int]] = {}
    highest: dict[str, int] = {}
    for record in heapq.merge(*(read_processed(p) for p in consumer_logs)):
        verdict.processed += 1
        numbers = seen.setdefault(record.key, set())
        if record.seq in numbers:
            verdict.duplicates += 1
            continue
        numbers.add(record.seq)
        if record.seq < highest.get(record.key, -1):
            verdict.order_violations += 1
            if len(verdict.examples) < 5:
                verdict.examples.append(
                    f"{record.key} #{record.seq} (p{record.partition}@{record.offset} by {record.consumer}) "
                    f"after #{highest[record.key]}"
                )
        highest[record.key] = max(highest.get(record.key, -1), record.seq)
    for key, count in delivered.items():
        verdict.lost += count - len(seen.get(key, set()) & set(range(count)))
    return verdict
