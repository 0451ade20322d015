"""``ordo sandbox --autoscale``'s report: the rate reached, each growth and how long the readers took
to read its new partitions, the verifier's verdicts, and the checks that fail the run. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from rich.table import Table

from ordo.verify import TopicVerdict
from ordo_sandbox.ramp import Growth
from ordo_sandbox.report import Check, SparkOutcome, fill, seconds
from ordo_sandbox.scenario.verify import Verdict

__all__ = ["READ_BOUND", "AutoscaleReport", "autoscale_checks", "render_autoscale"]

READ_BOUND = 30.0
"""Seconds from a growth's decision to its new partitions' first record read (issue 43)."""


@dataclass
class AutoscaleReport:
    seconds: float
    """The load's whole run: the ramp and the hold at its end."""
    start_rate: float
    end_rate: float
    keys: int
    produced: int
    """Records the load generators wrote (what must be in Kafka, each once and in order)."""
    peak_rate: float
    """The highest records/s into Kafka over any 5 s (end offsets, corrected for markers)."""
    target: float
    """Records/s per partition the autoscaler was given."""
    partitions: tuple[int, int]
    """(at the start, at the end)."""
    kafka: TopicVerdict
    consumers: Verdict
    growths: list[Growth] = field(default_factory=list)
    spark: SparkOutcome | None = None
    spark_skipped: str = ""
    workdir: str = ""
    lost_at: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in autoscale_checks(self))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for growth, out in zip(self.growths, data["growths"], strict=True):
            out["to_consumers_seconds"] = _round(growth.to_consumers())
            out["to_spark_seconds"] = _round(growth.to_spark())
        data["checks"] = [asdict(c) for c in autoscale_checks(self)]
        data["ok"] = self.ok
        return data


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _reached(growths: list[Growth], delay: str) -> Check:
    name = "GatedConsumers" if delay == "consumers" else "the Spark pipeline"
    slow, never = [], []
    for g in growths:
        seconds = g.to_consumers() if delay == "consumers" else g.to_spark()
        label = f"{g.from_partitions} → {g.to_partitions}"
        if seconds is None:
            never.append(label)
        elif seconds > READ_BOUND:
            slow.append(f"{label} in {seconds:.1f} s")
    detail = "; ".join(
        [f"never read: {', '.join(never)}"] * bool(never) + [f"too slow: {', '.join(slow)}"] * bool(slow)
    )
    return Check(
        f"{name} read every growth's new partitions within {READ_BOUND:g} s of the decision",
        bool(growths) and not never and not slow,
        detail or ("no growth" if not growths else _delays(growths, delay)),
    )


def _delays(growths: list[Growth], delay: str) -> str:
    seconds = [g.to_consumers() if delay == "consumers" else g.to_spark() for g in growths]
    return ", ".join(
        f"{g.from_partitions} → {g.to_partitions}: {s:.1f} s"
        for g, s in zip(growths, seconds, strict=True)
        if s is not None
    )


def autoscale_checks(report: AutoscaleReport) -> list[Check]:
    kafka, consumers = report.kafka, report.consumers
    grew = [g for g in report.growths if g.completed_at is not None]
    steps = " then ".join(f"{g.from_partitions} → {g.to_partitions}" for g in report.growths)
    if len(grew) < len(report.growths):
        steps += f" ({len(report.growths) - len(grew)} not completed)"
    nothing = (
        f"no growth decided (peak {report.peak_rate:,.0f} records/s, "
        f"target {report.target:,.0f} per partition)"
    )
    out = [
        Check("the topic grew by itself", bool(grew) and len(grew) == len(report.growths), steps or nothing),
        Check(
            "every record in Kafka exactly once (read_committed)",
            kafka.missing == 0 and kafka.duplicates == 0 and kafka.records == report.produced,
            f"{kafka.records:,} of {report.produced:,} records; missing {kafka.missing}, "
            f"duplicates {kafka.duplicates}",
        ),
        Check(
            "per-key order in Kafka, across epochs; no key in another epoch's partition",
            kafka.order_violations == 0 and kafka.misplaced == 0 and kafka.unreadable == 0,
            f"{kafka.order_violations} violations ({kafka.misplaced} misplaced) over {kafka.epochs} epoch(s)",
        ),
        Check(
            "GatedConsumers lost nothing",
            consumers.lost == 0,
            f"{consumers.lost} records never processed"
            + (f": {', '.join(report.lost_at)}" if report.lost_at else ""),
        ),
        Check(
            "GatedConsumers kept per-key order",
            consumers.order_violations == 0,
            f"{consumers.order_violations} violations",
        ),
        _reached(report.growths, "consumers"),
    ]
    if report.spark is not None:
        spark = report.spark
        lost = report.produced - spark.distinct
        out.append(
            Check(
                "Spark ordered pipeline: in order, nothing lost",
                spark.gaps == 0 and spark.inversions == 0 and lost == 0,
                f"{spark.rows:,} rows; gaps {spark.gaps}, inversions {spark.inversions}, lost {lost}",
            )
        )
        out.append(_reached(report.growths, "spark"))
    return out


def render_autoscale(report: AutoscaleReport) -> Table:
    table = Table(
        title=f"ordo sandbox --autoscale — {report.start_rate:,.0f} → {report.end_rate:,.0f} records/s "
        f"over {report.keys:,} keys, {report.seconds:g} s"
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    kafka, consumers = report.kafka, report.consumers
    rows = [
        ("records produced (OrderedProducers)", f"{report.produced:,}"),
        ("peak rate into Kafka (5 s)", f"{report.peak_rate:,.0f} records/s"),
        ("target per partition", f"{report.target:,.0f} records/s"),
        ("partitions (start → end)", f"{report.partitions[0]} → {report.partitions[1]}"),
        ("records in Kafka (read_committed)", f"{kafka.records:,}"),
        ("records consumed (GatedConsumers)", f"{consumers.processed:,}"),
        ("per-key order violations (Kafka / consumers)",
         f"{kafka.order_violations} / {consumers.order_violations}"),
        ("lost records (Kafka / consumers)", f"{kafka.missing} / {consumers.lost}"),
    ]  # fmt: skip
    for g in report.growths:
        rows.append(
            (
                f"growth {g.from_partitions} → {g.to_partitions} decided at {g.decided_at:.1f} s"
                + (f" (target exceeded at {g.crossed_at:.1f} s)" if g.crossed_at is not None else ""),
                f"completed {seconds(None if g.completed_at is None else g.completed_at - g.decided_at)} "
                f"later; read by consumers {seconds(g.to_consumers())}, by Spark {seconds(g.to_spark())}",
            )
        )
    return fill(table, rows, report.spark, report.spark_skipped, autoscale_checks(report))
