"""``ordo sandbox`` end to end, short and without Spark: every stage happens while data flows, and
the independent verification finds nothing lost, duplicated or out of order."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.testbed, pytest.mark.slow]


def test_a_short_sandbox_run_holds_every_check(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ordo.cli", "sandbox", "--duration", "20", "--no-spark",
         "--report", str(report_path), "--workdir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    print(f"sandbox took {time.monotonic() - started:.1f}s\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}")
    assert report_path.exists(), done.stderr[-2000:]
    report = json.loads(report_path.read_text())
    failed = [c for c in report["checks"] if not c["ok"]]
    assert done.returncode == 0 and report["ok"], failed

    assert report["orders"] > 1000
    assert report["kafka"]["records"] == report["orders"] and report["kafka"]["epochs"] == 2
    assert report["kafka"]["duplicates"] == report["kafka"]["missing"] == 0
    assert report["kafka"]["order_violations"] == 0
    assert report["consumers"]["lost"] == 0 and report["consumers"]["order_violations"] == 0
    assert report["consumers"]["processed"] >= report["orders"]

    stages = {s["step"]: s for s in report["stages"]}
    assert list(stages) == [
        "member added", "expansion completed", "member killed, its partitions moved", "member joined",
        "source writer stopped",
    ]  # fmt: skip
    assert all(s["seconds"] is not None for s in stages.values())
    assert "4 → 8" in stages["expansion completed"]["detail"]
    assert report["expansion_seconds"] is not None and report["expansion_seconds"] > 0
    killed = stages["member killed, its partitions moved"]["detail"]
    assert killed.startswith("SIGKILL orders-cdc-") and "→orders-cdc-" in killed
    assert "orders-cdc-4 got" in stages["member joined"]["detail"]
    assert "✓ every order in Kafka exactly once" in done.stdout
