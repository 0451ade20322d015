"""Run every benchmark module, print one table of ratios and absolutes and write
``benchmarks/report.md`` (with the machine's details and the timelines' PNGs).

Each module exposes ``run() -> list[Result]``; ratios are measured side by side in one run,
since absolute times on shared machines vary.
"""

from __future__ import annotations

import importlib
import sys
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ._report import machine, write_report
from ._result import Result

# Every ``*_bench.py`` next to this file is a benchmark module; cheap ones first.
_FIRST = ("partitioner_bench", "ordered_producer_bench", "expansion_bench")
_FOUND = sorted(p.stem for p in Path(__file__).parent.glob("*_bench.py"))
MODULES = [
    f"benchmarks.{m}"
    for m in sorted(_FOUND, key=lambda m: (m not in _FIRST, _FIRST.index(m) if m in _FIRST else 0, m))
]


def main(selected: list[str]) -> int:
    console = Console()
    results: list[Result] = []
    ran = [name for name in MODULES if not selected or any(s in name for s in selected)]
    if not ran:
        console.print(f"no benchmark matches {selected}; choose from {', '.join(MODULES)}")
        return 2
    for name in ran:
        console.print(f"[bold]running {name}[/bold]")
        results.extend(importlib.import_module(name).run())
    table = Table(title=f"ordo benchmarks — {machine()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    for column in ("benchmark", "ordo", "baseline", "ratio", "CPU µs/record", "target", "verdict"):
        table.add_column(column)
    for r in results:
        table.add_row(r.name, r.ordo_text, r.baseline_text, r.ratio_text, r.cpu_text, r.target, r.verdict)
    console.print(table)
    if not selected:  # the report is of the whole set; a partial run only prints
        console.print(f"report: {write_report(results, ran)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
