"""Which Lease events wake a ProducerGroup's pass at once, pure.

A member's Lease changes for three reasons: it acknowledges a generation, it is released (no
holder), or it is renewed (only ``renewTime`` moves). The first two change what the next pass
decides and are worth a pass at once. A renewal is not: the pass that runs every
min(1 s, session / 4) anyway judges every Lease's freshness. Waking on renewals made the pass
run back to back as groups grew (1,000 members renewing every 10 s: 100 wake-ups a second, each
pass listing every pod and Lease of the group).
"""

from __future__ import annotations

import threading

__all__ = ["LeaseWakeups"]


class LeaseWakeups:
    """Remembers each Lease's holder and acknowledgement; says whether an event changed them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[tuple[str, str], tuple[str | None, str | None]] = {}

    def wakes(self, namespace: str, name: str, holder: str | None, acked: str | None, gone: bool) -> bool:
        """Whether this event of Lease ``namespace/name`` should wake its group: it is new, gone,
        or names another holder or acknowledgement than its last event did."""
        key = (namespace, name)
        with self._lock:
            if gone:
                self._last.pop(key, None)
                return True
            before = self._last.get(key)
            self._last[key] = (holder, acked)
        return before != (holder, acked)
