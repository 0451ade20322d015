"""``ordo bench eos`` end to end on the testbed broker, and its pure helpers."""

from __future__ import annotations

import pytest

from ordo.cli import main as ordo
from ordo.cli.bench import percentile, tally
from ordo_testbed.kafka.fixtures import KafkaHandle


@pytest.mark.testbed
@pytest.mark.parametrize("registration", ["--pre-registration", "--no-pre-registration"])
def test_eos_bench_reports_and_verifies_exactly_once(
    kafka: KafkaHandle, capsys: pytest.CaptureFixture[str], registration: str
) -> None:
    code = ordo(
        ["bench", "eos", "--bootstrap-servers", kafka.bootstrap, "--input-topic", kafka.topic("in"),
         "--output-topic", kafka.topic("out"), "--consumer-group-id", kafka.topic("g"), "--records", "3000",
         "--record-size", "64", "--transaction-size", "250", "--poll-timeout", "50", registration]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    for row in ("records/s", "transactions/s", "commit latency p50", "commit latency p99", "exactly once"):
        assert row in out


def test_bad_arguments_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert ordo(["bench", "eos", "--testbed", "--transaction-size", "0"]) == 1
    assert "--transaction-size must be at least 1" in capsys.readouterr().err


def test_tally_counts_duplicates_and_missing_of_this_run_only() -> None:
    values = [b"r1:0:xx", b"r1:1:xx", b"r1:1:xx", b"r2:2:xx", b"other"]
    assert tally("r1", 3, values) == (1, 1)
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0 and percentile([], 0.5) != percentile([], 0.5)
