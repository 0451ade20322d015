"""Aborted-transaction index rebuilt from the log itself (Tansu never reports aborted transactions).

Kafka keeps an index of (producer id, first offset, marker offset) per aborted transaction and
returns the entries overlapping a read_committed Fetch. Building it from the batches in the log
(transactional data batches open a transaction, control batches end it) rather than from the
Produce/EndTxn traffic keeps it exact after a proxy restart and for writes the proxy did not see.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from .records import ABORT_MARKER, batches, control_type, hole_at

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    marker_offset: int


@dataclass(slots=True)
class TxnIndex:
    """Per-partition index; ``scanned_to`` is the first offset not yet read."""

    scanned_to: int = 0
    name: str = ""  # topic[partition], for the trace
    open: dict[int, int] = field(default_factory=dict)  # producer id -> first offset
    aborted: list[AbortedTxn] = field(default_factory=list)

    def feed(self, blob: bytes | None, lasting: Callable[[int], bool] = lambda _: False) -> bool:
        """Index the batches of ``blob`` that continue the scan; False when ``blob`` leaves a gap
        (unless ``lasting(start)`` says the offsets missing from ``start`` will never come)."""
        hole = hole_at(blob, self.scanned_to, lasting)
        for batch in batches(blob[: hole.after.start] if hole is not None and blob else blob):
            if batch.last_offset < self.scanned_to:
                continue
            if batch.control:
                first = self.open.pop(batch.producer_id, None)
                marker = control_type(blob or b"", batch)
                if first is not None and marker == ABORT_MARKER:
                    self.aborted.append(AbortedTxn(batch.producer_id, first, batch.base_offset))
                _log.debug(
                    "%s: %s marker of pid %d epoch %d at %d (opened at %s)",
                    self.name, "abort" if marker == ABORT_MARKER else "commit",
                    batch.producer_id, batch.producer_epoch, batch.base_offset, first,
                )  # fmt: skip
            elif batch.transactional:
                if batch.producer_id not in self.open:
                    _log.debug(
                        "%s: pid %d epoch %d opens at %d",
                        self.name, batch.producer_id, batch.producer_epoch, batch.base_offset,
                    )  # fmt: skip
                self.open.setdefault(batch.producer_id, batch.base_offset)
            self.scanned_to = batch.last_offset + 1
        return hole is None

    def stable_offset(self) -> int:
        """The last stable offset of what was scanned: the first offset of the oldest transaction
        still open, else the end of the scan."""
        return min(self.open.values(), default=self.scanned_to)

    def overlapping(self, fetch_offset: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions a Fetch from ``fetch_offset`` returning data below ``upper`` must list."""
        return [t for t in self.aborted if t.marker_offset >= fetch_offset and t.first_offset < upper]
