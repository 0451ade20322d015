"""The epoch stamp: a record header naming the epoch its producer partitioned it with.

A consumer's view of the epoch log can lag the producers'. A record stamped with an epoch the
consumer has not seen yet must wait for the log to catch up: judged by the older history it
would look like a record of the previous epoch and could pass its gate too early.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["EPOCH_HEADER", "stamp", "stamped_epoch"]

EPOCH_HEADER = "ordo.epoch"


def stamp(epoch: int) -> list[tuple[str, bytes]]:
    """The headers to put on a record produced with ``epoch``."""
    return [(EPOCH_HEADER, str(epoch).encode())]


Headers = Sequence[tuple[str, str | bytes | None]] | Mapping[str, str | bytes | None]


def stamped_epoch(headers: Headers | None) -> int | None:
    """The epoch a record was stamped with, or None (unstamped, or a stamp that is not a number:
    such a record is judged by the epoch log alone, as if it were unstamped)."""
    if not headers:
        return None
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    for name, value in pairs:
        if name == EPOCH_HEADER and value is not None:
            try:
                return int(value)
            except ValueError:
                return None
    return None
