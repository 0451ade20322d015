"""Where ``ordo verify`` finds a record's key and number (ordo.verify.records), what it says about
records it cannot read, and how its options pick a layout."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from ordo.cli import CliError
from ordo.cli.verify import layout_of
from ordo.verify import AnyOf, JsonFields, KafkaKey, RawRecord, RecordLayout, StoredRecord, check_topic
from ordo.verify.records import why_unreadable


def _record(
    value: object, key: bytes | None = None, headers: tuple[tuple[str, bytes | None], ...] = ()
) -> RawRecord:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return RawRecord(0, 7, key, raw, headers)


def test_json_fields_read_flat_nested_and_numbers_as_text() -> None:
    layout = JsonFields("customer", "order_no")
    assert layout.read(_record({"customer": "c1", "order_no": 3, "x": 1})) == ("c1", 3)
    assert layout.read(_record({"customer": 17, "order_no": "4"})) == ("17", 4)
    assert JsonFields("order.customer", "order.n").read(_record({"order": {"customer": "c", "n": 2}})) == (
        "c",
        2,
    )
    wrong = ({"customer": "c1"}, {"customer": "c", "order_no": "x"}, {"customer": "c", "order_no": True})
    for unreadable in (*wrong, [1, 2], b"not json", b"\xff\xfe"):
        assert layout.read(_record(unreadable)) is None, unreadable


def test_the_kafka_key_with_a_header_a_field_or_the_offset() -> None:
    record = _record({"version": 5}, key=b"acct-9", headers=(("seq", b"12"), ("other", None)))
    assert KafkaKey(seq_header="seq").read(record) == ("acct-9", 12)
    assert KafkaKey(seq_field="version").read(record) == ("acct-9", 5)
    assert KafkaKey().read(record) == ("acct-9", 7) and not KafkaKey().numbered
    assert KafkaKey(seq_header="nope").read(record) is None
    assert KafkaKey(seq_header="seq").read(_record({}, headers=(("seq", b"1"),))) is None  # no key


def test_any_of_takes_the_first_that_reads() -> None:
    layout = AnyOf((JsonFields("k", "s"), JsonFields("p", "seq", key_prefix="src-")))
    assert layout.read(_record({"k": "a", "s": 1})) == ("a", 1)
    assert layout.read(_record({"p": 3, "seq": 9})) == ("src-3", 9)
    assert layout.numbered and not AnyOf((JsonFields("k", "s"), KafkaKey())).numbered
    assert '{"k": key' in layout.describe() and '{"p": key' in layout.describe()


@pytest.mark.parametrize(
    ("samples", "says", "suggests"),
    [
        ([_record({"customer": "c1", "order_no": i, "amount": 2.5}) for i in range(3)],
         "JSON objects with fields amount, customer, order_no", "--key-field customer --seq-field order_no"),
        ([_record(b"plain text", key=b"k", headers=(("seq", str(i).encode()),)) for i in range(3)],
         "not JSON objects", "--seq-header seq"),
        ([_record({"amount": 1}, key=b"k")], "with a Kafka record key", "--seq-offset"),
        ([_record({"amount": 1})], "without a Kafka record key", None),
    ],
)  # fmt: skip
def test_unreadable_records_are_described_with_options_that_read_them(
    samples: list[RawRecord], says: str, suggests: str | None
) -> None:
    text = why_unreadable(samples, JsonFields("k", "s"))
    assert 'it reads JSON values {"k": key, "s": n, ...}' in text and says in text, text
    assert "--key-field FIELD --seq-field FIELD" in text  # how to point it, always
    if suggests is None:
        assert "This would read them" not in text
    else:
        assert f"This would read them: {suggests}." in text, text


def _formats(**layouts: RecordLayout) -> dict[str, Callable[[], RecordLayout]]:
    return {name: (lambda layout=layout: layout) for name, layout in layouts.items()}  # type: ignore[misc]


def test_the_options_pick_one_layout_and_refuse_what_contradicts() -> None:
    harness = JsonFields("k", "s")
    installed = _formats(**{"ordo-testbed": harness})
    assert layout_of("customer", "n", None, False, None, installed) == JsonFields("customer", "n")
    assert layout_of(None, None, "seq", False, None, installed) == KafkaKey(seq_header="seq")
    assert layout_of(None, "n", None, False, None, installed) == KafkaKey(seq_field="n")
    assert layout_of(None, None, None, True, None, installed) == KafkaKey()
    assert layout_of(None, None, None, False, "ordo-testbed", installed) == harness
    assert layout_of(None, None, None, False, None, installed) == AnyOf((harness,))
    for args, message in [
        (("c", None, None, False, None), "--key-field needs --seq-field"),
        ((None, None, "h", True, None), "give one of --seq-header, --seq-offset"),
        (("c", "n", None, False, "ordo-testbed"), "--format names a whole format"),
        ((None, None, None, False, "nope"), r"no such record format \(ordo-testbed\)"),
    ]:
        with pytest.raises(CliError, match=message):
            layout_of(*args, installed)
    with pytest.raises(CliError, match="say where each record's key and per-key number are: --key-field"):
        layout_of(None, None, None, False, None, {})


def test_without_numbers_only_placement_is_checked() -> None:
    # key a in partitions 0 and 1 within one epoch: misplaced; offsets are no sequence
    records = [StoredRecord(0, 5, "a", 5), StoredRecord(0, 9, "a", 9), StoredRecord(1, 2, "a", 2)]
    verdict = check_topic("t", records, numbered=False)
    assert (verdict.duplicates, verdict.missing, verdict.misplaced) == (0, 0, 1)
    assert not verdict.ok and "no per-key numbers" in verdict.summary()
    assert check_topic("t", records[:2], numbered=False).ok
