import pytest

from ordo.epochs.registry import ProducerReport, RegistryError, live_reports, parse_report


def _report(**kw: object) -> ProducerReport:
    base: dict[str, object] = {
        "producer_id": "p-1",
        "topics": ("orders",),
        "session_timeout_ms": 10_000,
        "reported_at_ms": 1_000_000,
    }
    return ProducerReport.model_validate(base | kw)


def test_round_trip_and_liveness() -> None:
    report = _report(fenced={"orders": 3})
    parsed = parse_report(b"p-1", report.model_dump_json().encode())
    assert parsed == report
    assert report.live(1_010_000) and not report.live(1_010_001)
    assert not _report(closed=True).live(1_000_000)
    assert parse_report(b"p-1", None) is None, "a tombstone is no report"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (b"p-1", b"\x00\xffgarbage", "not a valid producer report"),
        (b"p-1", b'{"schema_version": 2, "producer_id": "p-1"}', "schema_version"),
        (b"p-2", _report().model_dump_json().encode(), "key does not match producer_id 'p-1'"),
        (
            b"p-1",
            b'{"producer_id": "p-1", "topics": [], "session_timeout_ms": 1, "reported_at_ms": 0}',
            "100",
        ),
    ],
)
def test_invalid_records_are_refused_with_the_record_named(key: bytes, value: bytes, message: str) -> None:
    with pytest.raises(RegistryError, match=message) as error:
        parse_report(key, value)
    assert repr(key) in str(error.value)


def test_live_reports_of_a_topic() -> None:
    reports = [
        _report(),
        _report(producer_id="p-2", topics=("other",)),
        _report(producer_id="p-3", reported_at_ms=0),
    ]
    assert list(live_reports(reports, "orders", 1_000_500)) == ["p-1"]
