"""Types of the C extension built from _fastproduce.c (optional: absent without a compiler)."""

from collections.abc import Callable, Sequence
from typing import Any

class Lease:
    """Until when a producer may queue records: ``time.monotonic()`` below ``until``."""

    until: float

class FastProduce:
    """OrderedProducer.produce's common case in one C call; every other call goes to ``slow``.
    Calls made once ``lease.until`` has passed go to ``slow`` too. With a ``journal`` (the open
    transaction's records, fencing="broker") each record handed over is appended as topic, value, key."""

    def __init__(
        self,
        routes: dict[str, int | tuple[int, frozenset[int]] | tuple[int, frozenset[int], int]],
        lease: Lease,
        raw: Callable[..., None],
        slow: Callable[..., None],
        journal: list[Any] | None = None,
        pending: list[Any] | None = None,
        pending_limit: int = 0,
    ) -> None: ...
    def drain(self) -> None:
        """Hand the records taken while a commit ran (``pending``: topic, value, key, partition
        each) to ``raw`` in order and journal them; what ``raw`` refused stays, its error raised."""
    buffering: bool
    """A commit runs: records are appended to ``pending`` (up to ``pending_limit``), not handed over."""
    def __call__(self, *args: Any, **kwargs: Any) -> None: ...
    @property
    def fast_calls(self) -> int:
        """Records that took the C path."""
    raw: Callable[..., None]
    """The bound produce() records are handed to (a renewed producer's, after a fence)."""

def murmur2(data: bytes, /) -> int:
    """The Java client's ``Utils.murmur2`` of ``data``: a signed 32-bit int."""

def murmur2_partitions(keys: Sequence[bytes | str | None], partitions: int, /) -> frozenset[int]:
    """The partitions murmur2 puts records with ``keys`` in, of ``partitions`` (every one for a None key)."""
