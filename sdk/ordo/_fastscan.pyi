"""Types of the C extension built from _fastscan.c (optional: absent without a compiler)."""

from collections.abc import Mapping

from confluent_kafka import Message

FIELDS_END: int
"""Where the fields this module reads of confluent-kafka's Message struct end, in bytes."""

def scan(
    messages: list[Message],
    rules: Mapping[int, tuple[tuple[int, int, int, tuple[int, ...], int], ...]] | None = None,
    /,
) -> tuple[bool, bool, dict[int, Message], list[int]]:
    """(any error event, any record that may have headers, {partition: its last record}, [index
    of each misplaced record, given ``rules``: partition -> its checked offset ranges])."""
