"""``ordo bench all`` and ``ordo bench <name>``: the repository's benchmarks (``python -m
benchmarks``), run from a checkout; outside one they say so in a line."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from ordo.cli import CliError

__all__ = ["checkout_benchmarks", "register", "run_checkout"]


def register(kinds: Any) -> None:
    """``all`` and one kind per benchmark module of the checkout, on ``ordo bench``'s subparsers."""
    every: argparse.ArgumentParser = kinds.add_parser(
        "all", help="every benchmark of the repository; writes benchmarks/report.md"
    )
    every.description = (
        "Runs every benchmark of the repository (python -m benchmarks, from a checkout) and writes "
        "benchmarks/report.md with its timelines."
    )
    every.set_defaults(run=run_checkout, benchmarks=[])
    for name in checkout_benchmarks():
        one: argparse.ArgumentParser = kinds.add_parser(name, help=f"benchmarks/{name}_bench.py")
        one.description = f"Runs benchmarks/{name}_bench.py of the repository alone (writes no report)."
        one.set_defaults(run=run_checkout, benchmarks=[f"{name}_bench"])


def _checkout() -> Path | None:
    """The repository this harness runs from, when it has the ``benchmarks`` package."""
    root = Path(__file__).resolve().parents[3]  # testbed/ordo_testbed/bench/ -> the repository
    return root if (root / "benchmarks" / "__main__.py").is_file() else None


def checkout_benchmarks() -> list[str]:
    """The benchmark modules of the checkout (``benchmarks/<name>_bench.py``), by name."""
    root = _checkout()
    if root is None:
        return []
    return sorted(p.stem.removesuffix("_bench") for p in (root / "benchmarks").glob("*_bench.py"))


def run_checkout(args: argparse.Namespace) -> int:
    """``python -m benchmarks [modules]`` in the checkout: one process, its exit code passed on."""
    root = _checkout()
    if root is None:
        raise CliError("the benchmarks live in ordo's repository: run `ordo bench all` from a checkout")
    return subprocess.call([sys.executable, "-m", "benchmarks", *args.benchmarks], cwd=root)
