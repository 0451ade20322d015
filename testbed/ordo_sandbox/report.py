"""The sandbox's report: what was measured, which checks hold, and its table. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from rich.table import Table

from ordo.verify import TopicVerdict
from ordo_sandbox.scenario.verify import Verdict
from ordo_sandbox.stages import Step

__all__ = ["Check", "SandboxReport", "SparkOutcome", "StageOutcome", "checks", "render"]


@dataclass(frozen=True)
class StageOutcome:
    step: Step
    started: float
    """Seconds after the data started flowing."""
    seconds: float | None
    """How long it took to settle (a rebalance, an expansion); None when it did not. A member
    added or joining: from its process saying it started, so the pod's start is not counted."""
    detail: str = ""
    pod_start: float | None = None
    """A member added or joining: seconds until its process started (Python and the clients
    imported, Kafka and the API reached); None for the other stages."""

    @property
    def happened(self) -> bool:
        return self.seconds is not None


@dataclass(frozen=True)
class SparkOutcome:
    rows: int
    distinct: int
    gaps: int
    inversions: int


@dataclass
class SandboxReport:
    duration: float
    members: int
    orders: int
    """Orders the writer inserted into the source: what must arrive, each once and in order."""
    kafka: TopicVerdict
    consumers: Verdict
    stages: list[StageOutcome] = field(default_factory=list)
    expansion_seconds: float | None = None
    fence_wait_seconds: float | None = None
    longest_stall: float = 0.0
    """The longest a member's unit of work took (blocked by a fence, or a handoff)."""
    spark: SparkOutcome | None = None
    spark_skipped: str = ""
    workdir: str = ""
    lost_at: list[str] = field(default_factory=list)
    """Where the first orders the consumers never processed sit in Kafka ("key #n at p3@812")."""

    @property
    def ok(self) -> bool:
        return all(c.ok for c in checks(self))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["checks"] = [asdict(c) for c in checks(self)]
        data["ok"] = self.ok
        return data


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def checks(report: SandboxReport) -> list[Check]:
    kafka, consumers = report.kafka, report.consumers
    out = [
        Check(
            "every order in Kafka exactly once (read_committed)",
            kafka.missing == 0 and kafka.duplicates == 0 and kafka.records == report.orders,
            f"{kafka.records:,} of {report.orders:,} orders; missing {kafka.missing}, "
            f"duplicates {kafka.duplicates}",
        ),
        Check(
            "per-key order in Kafka, across epochs",
            kafka.order_violations == 0,
            f"{kafka.order_violations} violations over {kafka.epochs} epoch(s)",
        ),
        Check(
            "consumers lost nothing",
            consumers.lost == 0,
            f"{consumers.lost} orders never processed"
            + (f": {', '.join(report.lost_at)}" if report.lost_at else ""),
        ),
        Check(
            "consumers kept per-key order",
            consumers.order_violations == 0,
            f"{consumers.order_violations} violations",
        ),
    ]
    happened = {s.step: s for s in report.stages}
    for step in Step:
        stage = happened.get(step)
        detail = "did not happen" if stage is None or not stage.happened else stage.detail
        out.append(Check(step.value, stage is not None and stage.happened, detail))
    if report.spark is not None:
        spark = report.spark
        lost = report.orders - spark.distinct
        out.append(
            Check(
                "Spark ordered pipeline: in order, nothing lost",
                spark.gaps == 0 and spark.inversions == 0 and lost == 0,
                f"{spark.rows:,} rows; gaps {spark.gaps}, inversions {spark.inversions}, lost {lost}",
            )
        )
    return out


def render(report: SandboxReport) -> Table:
    table = Table(title=f"ordo sandbox — {report.duration:g} s of data, {report.members} members at start")
    table.add_column("measure")
    table.add_column("value", justify="right")
    kafka, consumers = report.kafka, report.consumers
    rows = [
        ("orders written to the source", f"{report.orders:,}"),
        ("records in Kafka (read_committed)", f"{kafka.records:,}"),
        ("records consumed (2 GatedConsumers)", f"{consumers.processed:,}"),
        ("duplicates in Kafka", str(kafka.duplicates)),
        ("re-deliveries to consumers (at-least-once)", str(consumers.duplicates)),
        ("per-key order violations (Kafka / consumers)",
         f"{kafka.order_violations} / {consumers.order_violations}"),
        ("lost records (Kafka / consumers)", f"{kafka.missing} / {consumers.lost}"),
        ("expansion 4 → 8 (fence wait)",
         f"{seconds(report.expansion_seconds)} ({seconds(report.fence_wait_seconds)})"),
        ("longest producer stall", seconds(report.longest_stall)),
    ]  # fmt: skip
    for stage in report.stages:
        if stage.step not in (Step.EXPAND, Step.STOP_WRITER):
            value = seconds(stage.seconds)
            if stage.pod_start is not None:
                value += f" (its process started in {seconds(stage.pod_start)})"
            rows.append((f"rebalance: {stage.step.value}", value))
    return fill(table, rows, report.spark, report.spark_skipped, checks(report))


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def fill(
    table: Table,
    rows: list[tuple[str, str]],
    spark: SparkOutcome | None,
    spark_skipped: str,
    verdicts: list[Check],
) -> Table:
    """A report's table: its measures, the Spark pipeline's line, then every check marked."""
    if spark is not None:
        rows.append(("Spark pipeline rows (gaps / inversions)",
                     f"{spark.rows:,} ({spark.gaps} / {spark.inversions})"))  # fmt: skip
    elif spark_skipped:
        rows.append(("Spark pipeline", f"skipped: {spark_skipped}"))
    for name, value in rows:
        table.add_row(name, value)
    table.add_section()
    for check in verdicts:
        mark = "[green]✓[/green]" if check.ok else "[red]✗[/red]"
        table.add_row(f"{mark} {check.name}", check.detail)
    return table
