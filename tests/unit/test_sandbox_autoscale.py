"""``ordo sandbox --autoscale``'s pure parts: the ramp, the autoscaler's spec, when each growth
reached the readers, the rate reached, the report's verdict and the live view's autoscaler."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from ordo.api import TopicAutoscaler
from ordo.cli import main as ordo
from ordo.verify import TopicVerdict
from ordo_sandbox.autoscale_report import READ_BOUND, AutoscaleReport, autoscale_checks, render_autoscale
from ordo_sandbox.monitor import autoscaler_row
from ordo_sandbox.ramp import AutoscaleSettings, Growth, Ramp, first_reads, peak_rate
from ordo_sandbox.report import SparkOutcome
from ordo_sandbox.scenario.verify import Verdict
from ordo_sandbox.view import Snapshot
from ordo_sandbox.view import render as render_view

# --- the ramp and the autoscaler ----------------------------------------------------------------


def test_the_ramp_grows_linearly_then_holds_and_its_records_are_the_rates_integral() -> None:
    ramp = Ramp(1000, 10_000, 60, hold=20)
    assert ramp.total_seconds == 80
    assert [ramp.rate_at(t) for t in (-1, 0, 30, 60, 79, 81)] == [0, 1000, 5500, 10_000, 10_000, 0]
    assert ramp.due(0) == 0 and ramp.due(1) == 1075  # 1000 + 150 / 2 in the first second
    assert ramp.due(60) == 330_000  # (1000 + 10000) / 2 * 60
    assert ramp.due(80) == ramp.due(1000) == 530_000
    dues = [ramp.due(t / 10) for t in range(801)]
    assert dues == sorted(dues)
    assert ramp.when(4000) == pytest.approx(20) and ramp.when(500) == 0 and ramp.when(20_000) is None


def test_a_ramp_shared_by_generators_sums_to_the_whole() -> None:
    ramp = Ramp(1000, 10_000, 60, hold=20)
    half = ramp.share(2)
    assert (half.start, half.end, half.seconds, half.hold) == (500, 5000, 60, 20)
    assert abs(2 * half.due(45.5) - ramp.due(45.5)) <= 1


@pytest.mark.parametrize(
    "args", [(0, 10, 60), (10, -1, 60), (10, 100, 0), (10, 100, 10, -1)]
)  # fmt: skip
def test_a_ramp_refuses_nonsense(args: tuple[float, ...]) -> None:
    with pytest.raises(ValueError):
        Ramp(*args)


def test_the_autoscalers_spec_is_one_the_model_accepts_and_its_growths_double() -> None:
    settings = AutoscaleSettings()
    spec = settings.spec("orders")
    model = TopicAutoscaler.model_validate(
        {"apiVersion": "ordo.dev/v1alpha1", "kind": "TopicAutoscaler", "metadata": {"name": "orders"},
         "spec": spec}
    )  # fmt: skip
    assert (model.spec.min_partitions, model.spec.max_partitions) == (4, 16)
    assert model.spec.targets.records_per_second_per_partition == 1000
    assert settings.expected_growths(4, Ramp(1000, 10_000, 60)) == [(4, 8), (8, 16)]
    assert settings.expected_growths(4, Ramp(1000, 3_000, 60)) == []
    with pytest.raises(ValueError, match="min <= max"):
        AutoscaleSettings(min_partitions=8, max_partitions=4)
    with pytest.raises(ValueError, match="target"):
        AutoscaleSettings(target=0)


# --- what is measured ---------------------------------------------------------------------------


def test_each_growth_is_read_first_when_a_record_of_one_of_its_new_partitions_is() -> None:
    growths = [Growth(4, 8, decided_at=20.0), Growth(8, 16, decided_at=50.0)]
    reads = [(5.0, 0), (25.0, 3), (24.0, 6), (23.5, 4), (52.0, 7), (55.0, 12), (54.0, 15)]
    assert first_reads(growths, reads) == [23.5, 54.0]
    assert first_reads(growths, [(1.0, 0), (30.0, 5)]) == [30.0, None]
    growths[0].consumers_at, growths[0].spark_at = 23.5, 31.0
    assert growths[0].to_consumers() == pytest.approx(3.5) and growths[0].to_spark() == pytest.approx(11.0)
    assert growths[1].to_consumers() is None


def test_the_peak_rate_is_the_best_span_of_the_history() -> None:
    history = [(float(t), 100 * t + (400 * (t - 10) if t > 10 else 0)) for t in range(21)]
    assert peak_rate(history, span=5) == pytest.approx(500)
    assert peak_rate([(0.0, 0), (2.0, 300)], span=5) == pytest.approx(150)  # shorter than the span
    assert peak_rate([]) == 0.0


# --- the report ---------------------------------------------------------------------------------


def _report(**changes: object) -> AutoscaleReport:
    report = AutoscaleReport(
        seconds=80, start_rate=1000, end_rate=10_000, keys=100_000, produced=500,
        peak_rate=9800.0, target=1000, partitions=(4, 16),
        kafka=TopicVerdict("orders", records=500, keys=100, partitions=16, epochs=3),
        consumers=Verdict(delivered=500, processed=500),
        growths=[Growth(4, 8, 20.0, completed_at=23.0, consumers_at=25.0, crossed_at=14.5),
                 Growth(8, 16, 50.0, completed_at=54.0, consumers_at=56.5)],
    )  # fmt: skip
    for name, value in changes.items():
        setattr(report, name, value)
    return report


def test_a_clean_autoscaling_run_passes_every_check_and_its_json_has_the_delays() -> None:
    report = _report()
    assert report.ok, [c for c in autoscale_checks(report) if not c.ok]
    data = json.loads(json.dumps(report.to_json(), default=str))
    assert data["ok"] is True and [g["to_consumers_seconds"] for g in data["growths"]] == [5.0, 6.5]
    assert data["growths"][0]["to_spark_seconds"] is None  # no Spark in this run: not checked
    grew = next(c for c in data["checks"] if c["name"] == "the topic grew by itself")
    assert grew["detail"] == "4 → 8 then 8 → 16"


@pytest.mark.parametrize(
    "change",
    [
        {"growths": []},
        {"growths": [Growth(4, 8, 20.0, completed_at=None, consumers_at=25.0)]},
        {"growths": [Growth(4, 8, 20.0, completed_at=23.0, consumers_at=None)]},
        {"growths": [Growth(4, 8, 20.0, completed_at=23.0, consumers_at=20.0 + READ_BOUND + 0.1)]},
        {"kafka_missing": 1}, {"kafka_duplicates": 1}, {"kafka_order_violations": 1}, {"kafka_misplaced": 1},
        {"kafka_records": 499}, {"consumers_lost": 1}, {"consumers_order_violations": 1},
        {"spark": SparkOutcome(500, 499, 0, 0)}, {"spark": SparkOutcome(500, 500, 1, 0)},
        {"spark": SparkOutcome(500, 500, 0, 0)},  # Spark never read a new partition
    ],
)  # fmt: skip
def test_any_failed_check_fails_the_autoscaling_run(change: dict[str, object]) -> None:
    report = _report()
    for name, value in change.items():
        if name.startswith("kafka_"):
            setattr(report.kafka, name.removeprefix("kafka_"), value)
        elif name.startswith("consumers_"):
            setattr(report.consumers, name.removeprefix("consumers_"), value)
        else:
            setattr(report, name, value)
    assert not report.ok


def test_spark_reading_every_growth_in_time_passes() -> None:
    report = _report(spark=SparkOutcome(600, 500, 0, 0))  # re-read rows are not lost ones
    for growth in report.growths:
        growth.spark_at = growth.decided_at + 12.0
    assert report.ok
    slow = _report(spark=SparkOutcome(500, 500, 0, 0))
    slow.growths[0].spark_at, slow.growths[1].spark_at = 55.0, 55.0
    check = next(c for c in autoscale_checks(slow) if "Spark pipeline read" in c.name)
    assert not check.ok and check.detail == "too slow: 4 → 8 in 35.0 s"


def test_the_autoscaling_report_table_shows_growths_delays_and_checks() -> None:
    console = Console(width=180, record=True)
    console.print(render_autoscale(_report(spark_skipped="--no-spark")))
    text = console.export_text()
    assert "growth 4 → 8 decided at 20.0 s (target exceeded at 14.5 s)" in text
    assert "read by consumers 5.0 s" in text
    assert "9,800 records/s" in text and "4 → 16" in text and "skipped: --no-spark" in text
    assert "✓ the topic grew by itself" in text and "✗" not in text


# --- the live view ------------------------------------------------------------------------------


def test_the_view_shows_the_autoscaler_its_decision_and_the_expansion_in_flight() -> None:
    body = {
        "spec": {"minPartitions": 4, "maxPartitions": 16, "targets": {"recordsPerSecondPerPartition": 1000}},
        "status": {
            "currentPartitions": 4, "desiredPartitions": 8, "expansion": "orders-8",
            "load": {"recordsPerSecondPerPartition": 1234.5},
            "lastDecision": {"time": "2026-11-28T21:00:05.123Z", "fromPartitions": 4, "toPartitions": 8,
                             "reason": "4938 records/s needs 5 partition(s)", "expansion": "orders-8"},
        },
    }  # fmt: skip
    row = autoscaler_row("orders", body, "Fencing", growths=1)
    assert (row.current, row.desired, row.bounds, row.rate, row.target) == (4, 8, (4, 16), 1234.5, 1000)
    assert row.decision == "4 → 8 at 21:00:05.123" and row.expansion == "orders-8 (Fencing)"
    snap = Snapshot(autoscaler=row, source_label="records produced", source_orders=4321, partitions=8)
    console = Console(width=200, record=True)
    console.print(render_view(snap))
    text = console.export_text()
    for expected in ("TopicAutoscaler orders", "4 / 8", "1,234 / 1,000", "orders-8 (Fencing)",
                     "needs 5 partition(s)", "records produced", "4,321"):  # fmt: skip
        assert expected in text, expected
    assert "ProducerGroup" not in text
    idle = autoscaler_row("orders", {"spec": body["spec"], "status": {"currentPartitions": 4}}, "", 0)
    assert idle.decision == "none yet" and idle.expansion == "none" and idle.rate is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rate-to", "5000"], "--rate-to: options of --autoscale; give --autoscale too"),
        (["--autoscale", "--members", "2"], "--members: --autoscale runs no ProducerGroup"),
        (["--autoscale", "--keys", "0"], "--keys must be at least 1"),
        (["--autoscale", "--rate-from", "0"], "the ramp's rates must be positive"),
        (["--autoscale", "--target", "-5"], "the target must be positive"),
    ],
)
def test_bad_autoscale_options_are_one_clear_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ordo(["sandbox", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


# --- the Spark pipeline's output ------------------------------------------------------------------


def test_spark_partition_reads_come_from_the_sink_logs_files_and_their_write_times(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from ordo_sandbox.spark import SparkPipeline

    spark = SparkPipeline(tmp_path, "127.0.0.1:9092", "orders")
    log = tmp_path / "checks" / "_spark_metadata"
    log.mkdir(parents=True)
    entries = []
    for batch, (partitions, written_ms) in enumerate((([0, 1, 1], 1_000_500), ([3, 5, 6, 5], 1_002_000))):
        path = tmp_path / "checks" / f"part-{batch}.parquet"
        pq.write_table(pa.table({"partition": partitions}), path)
        entries.append(json.dumps({"path": f"file://{path}", "modificationTime": written_ms}))
    (log / "0").write_text("v1\n" + "\n".join(entries) + "\n")
    assert not spark.started()
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / "metadata").write_text("{}")
    assert spark.started()
    assert sorted(spark.partition_reads()) == [
        (1000.5, 0), (1000.5, 1), (1002.0, 3), (1002.0, 5), (1002.0, 6),
    ]  # fmt: skip
    assert spark.committed_files() == [
        tmp_path / "checks" / "part-0.parquet",
        tmp_path / "checks" / "part-1.parquet",
    ]
    assert first_reads([Growth(4, 8, decided_at=990.0)], spark.partition_reads()) == [1002.0]
