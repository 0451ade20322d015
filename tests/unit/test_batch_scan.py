"""The GatedConsumer's look at a fetched batch (ordo/_batch_scan.py): the C pass of _fastscan.c
answers as its Python twin does, and the SDK uses the C pass only when its mirror of
confluent-kafka's Message reads built Messages back right (partitions, offsets, keys, errors,
headers). Consumed batches: tests/integration/test_gated_consumer.py; the misplaced-record check
against its rule: tests/unit/test_placement.py."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Message

from ordo import _batch_scan
from ordo._batch_scan import Rules, scan_python
from ordo._fastscan import FIELDS_END, scan  # built by `pip install -e .` (setup.py); CI has a compiler


def _ids(lasts: dict[int, Message]) -> dict[int, int]:
    return {partition: id(message) for partition, message in lasts.items()}


def _batch(pattern: str) -> list[Message]:
    """A record per letter: its partition's number, 'h' with headers, 'e' an error event."""
    batch = []
    for offset, letter in enumerate(pattern):
        if letter == "h":
            batch.append(Message(topic="t", partition=1, offset=offset, headers=[("ordo-epoch", b"2")]))
        elif letter == "e":
            eof = KafkaError(KafkaError._PARTITION_EOF)
            batch.append(Message(topic="t", partition=2, offset=offset, error=eof))
        else:
            batch.append(Message(topic="t", partition=int(letter), offset=offset))
    return batch


@pytest.mark.parametrize("pattern", ["", "0", "0001112", "0101", "01h0", "012e", "h", "e", "33332222e1111"])
def test_the_c_pass_answers_as_the_python_twin(pattern: str) -> None:
    batch = _batch(pattern)
    found, expected = scan(batch), scan_python(batch)
    assert found[:2] == expected[:2]
    assert _ids(found[2]) == _ids(expected[2])
    assert found[3] == expected[3] == []


def test_each_partition_maps_to_its_last_record_across_runs() -> None:
    batch = _batch("0011001")
    error, headers, lasts, misplaced = scan(batch)
    assert (error, headers, misplaced) == (False, False, [])
    assert {p: m.offset() for p, m in lasts.items()} == {0: 5, 1: 6}


def test_anything_but_a_list_of_messages_is_refused() -> None:
    with pytest.raises(TypeError, match="list"):
        scan(tuple(_batch("01")))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Message only"):
        scan([*_batch("01"), "not a message"])  # type: ignore[list-item]


def test_the_sdk_scans_in_c_here_as_this_confluent_kafkas_message_reads_back() -> None:
    assert Message.__basicsize__ >= FIELDS_END
    assert _batch_scan.scan is scan


def test_a_mirror_that_reads_back_wrong_leaves_the_python_twin(monkeypatch: pytest.MonkeyPatch) -> None:
    def misreads_headers(
        messages: list[Message], rules: Rules | None = None
    ) -> tuple[bool, bool, dict[int, Message], list[int]]:
        error, _, lasts, misplaced = scan(messages, rules)
        return error, False, lasts, misplaced  # as if the headers field sat elsewhere

    def misreads_offsets_or_keys(
        messages: list[Message], rules: Rules | None = None
    ) -> tuple[bool, bool, dict[int, Message], list[int]]:
        error, headers, lasts, _ = scan(messages, rules)
        return error, headers, lasts, []  # as if the offset or the key sat elsewhere

    for wrong in (misreads_headers, misreads_offsets_or_keys):
        monkeypatch.setattr("ordo._fastscan.scan", wrong)
        assert _batch_scan._checked_c_scan() is None, wrong.__name__


def test_the_probes_reach_the_misplaced_record_check() -> None:
    probes, rules = _batch_scan._probes()
    assert scan(probes, rules)[3] == scan_python(probes, rules)[3] == [6]
    assert scan(probes)[3] == [], "without rules nothing is checked"
