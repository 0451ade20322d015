"""``benchmarks/report.md``: the results table, the machine it ran on, and the timelines."""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import confluent_kafka

from ._plot import HERE
from ._result import Result

__all__ = ["machine", "write_report"]

CAPTIONS = {
    "expansion_timeline.png": "Producer throughput through expansions; each expansion's window shaded.",
    "async_consumer_rebalance.png": "AsyncConsumer vs a naive consumer through a rebalance.",
    "handoff_timeline.png": "Member throughput through a graceful leave, a crash and a hang.",
    "scale_curves.png": "Planning time, annotation size and epoch history size as groups and topics grow.",
    "scale_group_curves.png": (
        "A ProducerGroup on the real kube-apiserver, simulated members: time until settled, the "
        "operator's API writes per change, and the steady state."
    ),
    "scale_expansion_curves.png": (
        "An expansion 64 -> 128 partitions as registered producers grow: the fence wait, and the "
        "bytes written to the registry topic."
    ),
}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kib / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return (
        f"{os.cpu_count()} x {cpu}{memory}; {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}; confluent-kafka {confluent_kafka.__version__}, "
        f"librdkafka {confluent_kafka.libversion()[0]}"
    )


def write_report(results: Sequence[Result], modules: Sequence[str], path: Path = HERE / "report.md") -> Path:
    lines = [
        "# ordo benchmark report",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine()}.",
        f"Modules: {', '.join(m.rsplit('.', 1)[-1] for m in modules)}. Ratios are ordo / baseline, "
        "measured side by side in the same run (in brackets: the lowest and highest ratio of the rounds "
        "a median is taken from); absolute figures vary with the machine's load. The baseline of a "
        "throughput row is the raw confluent-kafka client tuned as a user would tune it, against the "
        "same Apache Kafka broker: the client's own ceiling on this machine. Verdict: met or missed "
        "when every round is on the same side of the target, unclear when the rounds fall on both. CPU "
        "µs/record: this process's CPU time (every thread: the SDK's, librdkafka's, the workers') per "
        "record, ordo / baseline (ordo's extra), each side's median over the rounds; the broker's "
        "is not counted (docs/performance.md says what dominates it).",
        "",
        "| benchmark | ordo | baseline | ratio | CPU µs/record | target | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        cells = (r.name, r.ordo_text, r.baseline_text, r.ratio_text, r.cpu_text, r.target or "-", r.verdict)
        lines.append("| " + " | ".join(cells) + " |")
    images = sorted(p.name for p in HERE.glob("*.png"))
    if images:
        lines += ["", "## Timelines", ""]
        for name in images:
            lines += [f"{CAPTIONS.get(name, name)}", "", f"![{name}]({name})", ""]
    path.write_text("\n".join(lines) + "\n")
    return path
