"""The record formats of ordo's test harness and demo, for the verifier (``ordo verify``; the
entry point ``ordo-testbed`` of the group ``ordo.record_formats``):

- numbered records, ``{"k": key, "s": n, ...}``: the sandbox's orders (key = customer, n = the
  customer's order number) and the scenarios' keyed producers;
- source records, ``{"p": source partition, "seq": n, ...}``: the scenarios' ProducerGroup members
  (key = ``src-<p>``, as their Kafka key).
"""

from __future__ import annotations

from ordo.verify import AnyOf, JsonFields, RawRecord

__all__ = ["NUMBERED", "RECORDS", "SOURCE", "decode_record"]

NUMBERED = JsonFields("k", "s")
SOURCE = JsonFields("p", "seq", key_prefix="src-")
RECORDS = AnyOf((NUMBERED, SOURCE))


def decode_record(value: bytes | None) -> tuple[str, int] | None:
    """(key, number) of a record value in one of the harness's formats, or None."""
    return RECORDS.read(RawRecord(0, 0, None, value))
