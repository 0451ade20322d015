"""The sandbox's live terminal view: a :class:`Snapshot` of the run rendered with rich. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

__all__ = ["AutoscalerRow", "MemberRow", "Snapshot", "render"]


@dataclass(frozen=True)
class MemberRow:
    pod: str
    partitions: tuple[int, ...] = ()
    acked: int | None = None
    state: str = "live"  # live | standby | killed | starting


@dataclass(frozen=True)
class AutoscalerRow:
    """A TopicAutoscaler's status (``ordo sandbox --autoscale``)."""

    name: str
    current: int | None = None
    desired: int | None = None
    bounds: tuple[int, int] = (0, 0)
    rate: float | None = None
    """Records/s per partition, as last measured."""
    target: float = 0.0
    decision: str = "-"
    """The last decision: when, from and to."""
    reason: str = ""
    expansion: str = "-"
    """The expansion in flight and its phase."""
    growths: int = 0


@dataclass
class Snapshot:
    elapsed: float = 0.0
    next_stage: str = ""
    group: str = "orders-cdc"
    generation: int = 0
    members: list[MemberRow] = field(default_factory=list)
    unassigned: tuple[int, ...] = ()
    topic: str = "orders"
    partitions: int = 0
    epoch: int = 0
    expansion: str = "-"
    stalled_for: float | None = None
    """Seconds the producers have been fenced now (None: not fenced)."""
    longest_stall: float = 0.0
    gates_closed: dict[str, int] = field(default_factory=dict)
    produced_per_s: float = 0.0
    consumed_per_s: float = 0.0
    source_orders: int = 0
    in_kafka: int = 0
    consumed: int = 0
    distinct: int = 0
    redeliveries: int = 0
    order_violations: int = 0
    spark_rows: int | None = None
    events: list[str] = field(default_factory=list)
    autoscaler: AutoscalerRow | None = None
    source_label: str = "orders in the source"


def _partitions(ps: tuple[int, ...]) -> str:
    return ", ".join(map(str, ps)) if ps else "-"


def _autoscaler(a: AutoscalerRow) -> Table:
    table = Table(title=f"TopicAutoscaler {a.name}", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right", max_width=60)
    rate = "-" if a.rate is None else f"{a.rate:,.0f}"
    if a.rate is not None and a.rate > a.target:  # above the target: the window is counting
        rate = f"[yellow]{rate}[/yellow]"
    counts = f"{a.current or '-'} / {a.desired or '-'}  (min {a.bounds[0]}, max {a.bounds[1]})"
    for what, value in (
        ("partitions current / desired", counts),
        ("records/s per partition / target", f"{rate} / {a.target:,.0f}"),
        ("last decision", a.decision),
        ("its reason", a.reason or "-"),
        ("expansion in flight", a.expansion),
        ("growths so far", str(a.growths)),
    ):  # fmt: skip
        table.add_row(what, value)
    return table


def render(s: Snapshot) -> RenderableType:
    header = Text.assemble(
        ("ordo sandbox", "bold"), f"  {s.elapsed:5.1f} s", ("  next: " + s.next_stage if s.next_stage else "")
    )
    members = Table(title=f"ProducerGroup {s.group} — generation {s.generation}", title_justify="left")
    for column in ("member", "source partitions", "acked", "state"):
        members.add_column(column)
    for m in s.members:
        style = {"killed": "red", "standby": "yellow", "starting": "dim"}.get(m.state, "")
        acked = "-" if m.acked is None else str(m.acked)
        members.add_row(m.pod, _partitions(m.partitions), acked, m.state, style=style)
    if s.unassigned:
        members.add_row("(unassigned)", _partitions(s.unassigned), "", "", style="yellow")

    topic = Table(title=f"topic {s.topic}", title_justify="left", show_header=False)
    topic.add_column("what")
    topic.add_column("value", justify="right")
    stall = (
        f"[red]fenced for {s.stalled_for:.1f} s[/red]"
        if s.stalled_for is not None
        else f"none (longest {s.longest_stall:.1f} s)"
    )
    gates = sum(s.gates_closed.values())
    gate_text = (
        f"{gates} ({', '.join(f'{c}: {n}' for c, n in sorted(s.gates_closed.items()))})" if gates else "0"
    )
    for what, value in (
        ("partitions / epoch", f"{s.partitions} / {s.epoch}"),
        ("expansion", s.expansion),
        ("producer stall", stall),
        ("gates closed", gate_text),
        ("records/s into Kafka", f"{s.produced_per_s:,.0f}"),
        ("records/s consumed", f"{s.consumed_per_s:,.0f}"),
    ):
        topic.add_row(what, value)

    counters = Table(title="verifier", title_justify="left", show_header=False)
    counters.add_column("what")
    counters.add_column("value", justify="right")
    violations = f"[red]{s.order_violations}[/red]" if s.order_violations else "0"
    rows = [
        (s.source_label, f"{s.source_orders:,}"),
        ("Kafka end offsets (with markers)", f"{s.in_kafka:,}"),
        ("consumed / distinct", f"{s.consumed:,} / {s.distinct:,}"),
        ("re-deliveries", str(s.redeliveries)),
        ("per-key order violations", violations),
    ]
    if s.spark_rows is not None:
        rows.append(("Spark pipeline rows", f"{s.spark_rows:,}"))
    for what, value in rows:
        counters.add_row(what, value)

    side = Table.grid(padding=(0, 2))
    side.add_row(members if s.autoscaler is None else _autoscaler(s.autoscaler), topic, counters)
    events = Text("\n".join(s.events[-8:]), style="dim")
    return Group(header, side, events)
