"""Per-key order, duplicates and loss over records fed in the order they were processed or stored."""

from __future__ import annotations

__all__ = ["KeyOrder"]


class KeyOrder:
    """Checks records of many keys, fed in the order they were processed (or stored).

    A violation is a record seen for the first time after a later record of its key was seen (a
    record seen again is a duplicate, not a reordering)."""

    def __init__(self, max_examples: int = 5) -> None:
        self.records = self.duplicates = self.order_violations = 0
        self.examples: list[str] = []
        self.seen: dict[str, set[int]] = {}
        self._highest: dict[str, int] = {}
        self._max_examples = max_examples

    @property
    def distinct(self) -> int:
        return sum(map(len, self.seen.values()))

    def add(self, key: str, seq: int, where: str = "") -> None:
        self.records += 1
        numbers = self.seen.setdefault(key, set())
        if seq in numbers:
            self.duplicates += 1
            return
        numbers.add(seq)
        highest = self._highest.get(key, -1)
        if seq < highest:
            self.order_violations += 1
            if len(self.examples) < self._max_examples:
                self.examples.append(f"{key} #{seq} ({where}) after #{highest}")
        self._highest[key] = max(highest, seq)

    def lost(self, delivered: dict[str, int]) -> int:
        """How many of each key's numbers 0..n-1 were never seen."""
        return sum(
            count - len(self.seen.get(key, set()) & set(range(count))) for key, count in delivered.items()
        )

    def missing(self, delivered: dict[str, int], limit: int) -> list[tuple[str, int]]:
        """The first ``limit`` (key, number) pairs of ``delivered`` never seen, in key order."""
        out: list[tuple[str, int]] = []
        for key, count in sorted(delivered.items()):
            seen = self.seen.get(key, set())
            out += [(key, seq) for seq in range(count) if seq not in seen][: limit - len(out)]
            if len(out) >= limit:
                break
        return out
