"""The Kafka testbed in its own process, so the proxy does not share the benchmark's GIL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ordo.testbed.kafka.broker import free_port


@contextmanager
def kafka_bootstrap() -> Iterator[str]:
    """``ORDO_BENCH_BOOTSTRAP`` (a real Kafka) or a testbed process started for this benchmark."""
    if os.environ.get("ORDO_BENCH_BOOTSTRAP"):
        yield os.environ["ORDO_BENCH_BOOTSTRAP"]
        return
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "ordo.testbed.kafka", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until the testbed says it is ready
        if "ready" not in line:
            raise RuntimeError(f"kafka testbed did not start: {line!r}")
        yield f"127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)


@contextmanager
def full_testbed(state_dir: Path) -> Iterator[tuple[str, Path]]:
    """``ordo testbed up`` in its own process: (Kafka bootstrap, kubeconfig path)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ordo.cli", "testbed", "up", "--kafka-port", "0", "--kube-port", "0",
         "--state-dir", str(state_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        lines = dict(process.stdout.readline().strip().split("=", 1) for _ in range(3))
        yield lines["KAFKA_BOOTSTRAP"], Path(lines["KUBECONFIG"])
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
