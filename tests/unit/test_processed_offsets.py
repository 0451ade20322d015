"""The consumers' processed-offset rule (ordo.epochs.processed), without Kafka."""

from __future__ import annotations

from ordo.epochs.processed import advances, passed

A, B = ("t", 0), ("t", 1)


def test_an_offset_advances_from_where_the_partition_was() -> None:
    assert advances({A: 5}, [(A, 9), (B, 3)]) == [(A, 5, 9), (B, -1, 3)]


def test_offsets_not_past_and_unknown_ones_do_not_advance() -> None:
    assert advances({A: 5, B: 2}, [(A, 5), (A, 4), (B, None)]) == []


def test_a_partition_named_twice_advances_from_its_earlier_offset() -> None:
    assert advances({}, [(A, 3), (A, 7), (A, 6)]) == [(A, -1, 3), (A, 3, 7)]


def test_advances_leaves_the_processed_offsets_as_they_are() -> None:
    processed = {A: 1}
    advances(processed, [(A, 4)])
    assert processed == {A: 1}


def test_passed_is_the_position_or_the_first_record_still_waiting() -> None:
    assert passed([(A, 10), (B, 10)], {A: 7}) == {A: 7, B: 10}


def test_a_record_waiting_past_the_position_does_not_raise_it() -> None:
    assert passed([(A, 10)], {A: 12}) == {A: 10}


def test_a_partition_without_a_position_is_left_out() -> None:
    assert passed([(A, -1001), (B, 0)], {A: 3}) == {B: 0}
