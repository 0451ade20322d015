"""The epoch stamp header: written by producers, read by consumers."""

from __future__ import annotations

from ordo.epochs import EPOCH_HEADER, stamp, stamped_epoch


def test_a_stamp_reads_back_as_its_epoch() -> None:
    assert stamped_epoch(stamp(7)) == 7
    assert stamped_epoch([("app", b"x"), *stamp(3)]) == 3
    assert stamped_epoch(dict(stamp(12))) == 12


def test_unstamped_or_garbled_records_have_no_epoch() -> None:
    assert stamped_epoch(None) is None
    assert stamped_epoch([]) is None
    assert stamped_epoch([("app", b"1")]) is None
    assert stamped_epoch([(EPOCH_HEADER, b"not-a-number")]) is None
    assert stamped_epoch([(EPOCH_HEADER, None)]) is None
