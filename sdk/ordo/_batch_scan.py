"""The GatedConsumer's first look at a fetched batch of one topic: is any record an error event,
may any carry headers (an epoch stamp), and which is each partition's last record.

``scan`` is the C pass of ``_fastscan.c`` when that module was built and its mirror of
confluent-kafka's Message struct reads built Messages back right (``_checked_c_scan``), and the
Python twin ``scan_python`` otherwise. Both answer the same for consumed batches (tests hold them
to it); the C pass may say "headers" of a record whose header list is empty, which only sends the
caller to look at the headers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka import KafkaError, Message

__all__ = ["Scan", "scan", "scan_python"]

_log = logging.getLogger(__name__)
Scan = Callable[[list[Message]], tuple[bool, bool, dict[int, Message]]]
_error_of, _headers_of, _partition_of = Message.error, Message.headers, Message.partition


def scan_python(messages: list[Message]) -> tuple[bool, bool, dict[int, Message]]:
    """(any error event, any record with headers, {partition: its last record}): three passes
    in C through confluent-kafka's methods, about 170 ns a record."""
    return (
        any(map(_error_of, messages)),
        any(map(_headers_of, messages)),
        dict(zip(map(_partition_of, messages), messages, strict=True)),  # type: ignore[arg-type]
    )


def _probes() -> list[Message]:
    """Built Messages whose fields the C pass must read back: partitions in runs and repeated,
    an error event, headers, on different records."""
    eof = KafkaError(KafkaError._PARTITION_EOF)
    return [
        Message(topic="t", partition=7, offset=1),
        Message(topic="t", partition=7, offset=2, headers=[("ordo-epoch", b"3")]),
        Message(topic="t", partition=300_000, offset=5),
        Message(topic="t", partition=7, offset=3),
        Message(topic="t", partition=0, offset=9, error=eof),
    ]


def _reads_back(c_scan: Scan) -> bool:
    probes = _probes()
    for batch in (probes[:0], probes[:1], probes[:2], probes[:4], probes):
        found = c_scan(batch)
        expected = scan_python(batch)
        if found[:2] != expected[:2] or {p: id(m) for p, m in found[2].items()} != {
            p: id(m) for p, m in expected[2].items()
        }:
            return False
    return True


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
