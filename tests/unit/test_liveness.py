import pytest

from ordo.epochs.liveness import ProducerReport, RegistryError, live_reports, parse_report, stragglers


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
    assert report.live(heard_at=50.0, now=60.0) and not report.live(heard_at=50.0, now=60.001)
    assert not _report(closed=True).live(heard_at=50.0, now=50.0)
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
    heard = [
        (_report(), 100.0),
        (_report(producer_id="p-2", topics=("other",)), 100.0),
        (_report(producer_id="p-3"), 80.0),  # received 20 s ago, session 10 s
    ]
    assert list(live_reports(heard, "orders", 100.5)) == ["p-1"]


@pytest.mark.parametrize("skew_ms", [-600_000, 600_000], ids=["clock-10-min-behind", "clock-10-min-ahead"])
def test_liveness_is_judged_by_arrival_not_by_the_producers_clock(skew_ms: int) -> None:
    """A producer's wall clock 10 minutes off changes nothing: only when its report arrived counts."""
    wall_now_ms = 1_700_000_000_000
    report = _report(reported_at_ms=wall_now_ms + skew_ms)  # session 10 s
    assert list(live_reports([(report, 500.0)], "orders", now=505.0)) == ["p-1"], "received 5 s ago"
    assert list(live_reports([(report, 500.0)], "orders", now=511.0)) == [], "nothing for 11 s"


def test_a_silent_producer_may_land_records_until_its_session_and_delivery_timeout_have_passed() -> None:
    """Session 10 s, delivery timeout 30 s, heard at 100: queued records may land until 145 with a
    5 s margin; a closed producer, one that acknowledged the fence, and a live one are no
    stragglers (the live one must acknowledge)."""
    silent = _report(delivery_timeout_ms=30_000)
    assert silent.may_write_for(100.0, now=120.0, margin=5.0) == pytest.approx(25.0)
    assert silent.may_write_for(100.0, now=146.0, margin=5.0) == 0.0
    heard = [
        (silent, 100.0),
        (_report(producer_id="closed", closed=True, delivery_timeout_ms=30_000), 100.0),
        (_report(producer_id="acked", fenced={"orders": 2}, delivery_timeout_ms=30_000), 100.0),
        (_report(producer_id="live", delivery_timeout_ms=30_000), 119.0),
        (_report(producer_id="elsewhere", topics=("other",), delivery_timeout_ms=30_000), 100.0),
    ]
    assert stragglers(heard, "orders", 2, now=120.0, margin=5.0) == {"p-1": pytest.approx(25.0)}
    assert stragglers(heard, "orders", 3, now=120.0, margin=5.0).keys() == {"p-1", "acked"}
    assert stragglers(heard, "orders", 2, now=146.0, margin=5.0) == {"live": pytest.approx(18.0)}, (
        "silent since 119"
    )
    assert stragglers(heard, "orders", 2, now=165.0, margin=5.0) == {}


def test_a_report_of_an_earlier_ordo_without_a_delivery_timeout_is_judged_by_its_session() -> None:
    old = ProducerReport.model_validate_json(
        b'{"producer_id": "p-1", "topics": ["orders"], "session_timeout_ms": 10000, "reported_at_ms": 0}'
    )
    assert old.delivery_timeout_ms == 0
    assert old.may_write_for(100.0, now=112.0, margin=5.0) == pytest.approx(3.0)
