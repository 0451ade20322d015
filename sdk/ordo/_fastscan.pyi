"""Types of the C extension built from _fastscan.c (optional: absent without a compiler)."""

from confluent_kafka import Message

FIELDS_END: int
"""Where the fields this module reads of confluent-kafka's Message struct end, in bytes."""

def scan(messages: list[Message], /) -> tuple[bool, bool, dict[int, Message]]:
    """(any error event, any record that may have headers, {partition: its last record})."""
