"""The gated consumers' first look at a fetched batch of one topic: is any record an error event,
may any carry headers (an epoch stamp), which is each partition's last record, and which records
are misplaced (``ordo.epochs.placement``; given the topic's ``rules``, partition -> its checked
offset ranges).

``scan`` is the C pass of ``_fastscan.c`` when that module was built and its mirror of
confluent-kafka's Message struct reads built Messages back right (``_checked_c_scan``), and the
Python twin ``scan_python`` otherwise. Both answer the same for consumed batches (tests hold them
to it); the C pass may say "headers" of a record whose header list is empty, which only sends the
caller to look at the headers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from confluent_kafka import KafkaError, Message

from .partitioners import murmur2, to_positive

__all__ = ["Rules", "Scan", "scan", "scan_python"]

_log = logging.getLogger(__name__)
Range = tuple[int, int, int, tuple[int, ...], int]
"""(start, end, count, earlier counts, epoch): ``ordo.epochs.placement.Check``, which this layer
may not import."""
Rules = Mapping[int, tuple[Range, ...]]
"""A topic's checked offset ranges per partition, newest first (``placement.topic_checks``)."""
_NO_END = (1 << 63) - 1
Scan = Callable[[list[Message], Rules | None], tuple[bool, bool, dict[int, Message], list[int]]]
_error_of, _headers_of, _partition_of = Message.error, Message.headers, Message.partition


def scan_python(
    messages: list[Message], rules: Rules | None = None
) -> tuple[bool, bool, dict[int, Message], list[int]]:
    """(any error event, any record with headers, {partition: its last record}, [index of each
    misplaced record]): three passes in C through confluent-kafka's methods, about 170 ns a
    record, and a Python look at each keyed record of a partition with checked ranges."""
    lasts: dict[int, Message] = dict(zip(map(_partition_of, messages), messages, strict=True))  # type: ignore[arg-type]
    misplaced: list[int] = []
    if rules and any(p in rules for p in lasts):
        for index, message in enumerate(messages):
            ranges = rules.get(message.partition())  # type: ignore[arg-type]
            key = message.key()
            if (
                ranges
                and type(key) is bytes
                and message.error() is None
                and _misplaced(ranges, message.partition(), message.offset(), key)  # type: ignore[arg-type]
            ):
                misplaced.append(index)
    return any(map(_error_of, messages)), any(map(_headers_of, messages)), lasts, misplaced


def _misplaced(ranges: Sequence[Range], partition: int, offset: int, key: bytes) -> bool:
    """``placement.judge`` (tests hold the two equal), as the C pass does it."""
    for start, end, count, earlier, _ in ranges:
        if start <= offset < end:
            h = to_positive(murmur2(key))
            return h % count != partition and any(h % n == partition for n in earlier)
    return False


def _probes() -> tuple[list[Message], dict[int, tuple[Range, ...]]]:
    """Built Messages whose fields the C pass must read back: partitions in runs and repeated,
    an error event, headers, on different records; and keyed records in and around a checked
    range of partition 1 (2 -> 4 partitions: keys "f" and "g" belong in 3, "d" in 1), one of
    them misplaced, so offsets and keys are read too."""
    eof = KafkaError(KafkaError._PARTITION_EOF)
    rules: dict[int, tuple[Range, ...]] = {1: ((2, 9, 4, (2,), 1),), 7: ((0, _NO_END, 8, (7, 5), 2),)}
    return [
        Message(topic="t", partition=7, offset=1),
        Message(topic="t", partition=7, offset=2, headers=[("ordo-epoch", b"3")]),
        Message(topic="t", partition=300_000, offset=5),
        Message(topic="t", partition=7, offset=3),
        Message(topic="t", partition=0, offset=9, error=eof),
        Message(topic="t", partition=1, offset=1, key=b"f"),  # before the range
        Message(topic="t", partition=1, offset=2, key=b"f"),  # misplaced
        Message(topic="t", partition=1, offset=3, key=b"d"),
        Message(topic="t", partition=1, offset=4),
        Message(topic="t", partition=1, offset=9, key=b"g"),  # past the range
    ], rules


def _reads_back(c_scan: Scan) -> bool:
    probes, rules = _probes()
    for batch in (probes[:0], probes[:1], probes[:2], probes[:4], probes[:5], probes):
        for given in (None, rules):
            found, expected = c_scan(batch, given), scan_python(batch, given)
            if (
                found[:2] != expected[:2]
                or found[3] != expected[3]
                or {p: id(m) for p, m in found[2].items()} != {p: id(m) for p, m in expected[2].items()}
            ):
                return False
    return scan_python(probes, rules)[3] == [6]  # the probes reach the check


def _checked_c_scan() -> Scan | None:
    try:
        from ._fastscan import FIELDS_END
        from ._fastscan import scan as c_scan
    except ImportError:  # built without a C compiler: the Python twin serves
        return None
    if Message.__basicsize__ < FIELDS_END or not _reads_back(c_scan):
        _log.info("confluent-kafka's Message is not laid out as ordo._fastscan expects: scanning in Python")
        return None
    return c_scan


scan: Scan = _checked_c_scan() or scan_python
