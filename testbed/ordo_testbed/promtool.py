"""Prometheus' ``promtool`` for the chart's alerting-rule tests (``promtool test rules``), built once
per machine from the Go module in ``testbed/promtool`` (its ``build`` script; ``make venv`` runs it)
into ``$ORDO_CACHE_DIR/promtool-<version>/bin`` (default ``~/.cache/ordo``), as the testbed's
kube-apiserver is (:mod:`ordo_testbed.kube.binaries`)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from pathlib import Path

from .cache import cache_root, go_mod_version

__all__ = ["PromtoolSetupError", "bin_dir", "prometheus_version", "promtool"]

MODULE = Path(__file__).resolve().parents[1] / "promtool"
_PINNED = "0.308.1"  # what go.mod requires; read from it in a checkout


class PromtoolSetupError(RuntimeError):
    """promtool is missing and cannot be built here: says what to do."""


def prometheus_version() -> str:
    """The module version of github.com/prometheus/prometheus that go.mod pins (v0.308.1 is
    Prometheus 3.8.1)."""
    return go_mod_version(MODULE, "github.com/prometheus/prometheus", _PINNED)


def bin_dir() -> Path:
    return cache_root() / f"promtool-{prometheus_version()}" / "bin"


def promtool(build: bool = True) -> Path:
    """The path of promtool; builds it first when missing (a few minutes, once per machine)."""
    folder = bin_dir()
    program = folder / "promtool"
    if os.access(program, os.X_OK):
        return program
    if not build or not (MODULE / "build").exists():
        raise PromtoolSetupError(
            f"no promtool {prometheus_version()} in {folder}: run `make venv` in ordo's checkout "
            "(testbed/promtool/build builds it with Go)"
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    with (folder.parent / ".lock").open("a") as lock:  # one build per machine at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.access(program, os.X_OK):
            result = subprocess.run([str(MODULE / "build"), str(folder)], check=False)
            if result.returncode != 0 or not os.access(program, os.X_OK):
                raise PromtoolSetupError(f"building promtool {prometheus_version()} failed (see above)")
    return program


def main() -> None:
    """Build now when missing: ``make venv`` does, so the first test run does not wait for it."""
    began = time.monotonic()
    path = promtool()
    print(f"promtool {prometheus_version()}: {path} ({time.monotonic() - began:.1f} s)")
