"""The brokers the benchmarks run against: Apache Kafka itself for throughput (no fault proxy in
the path: the raw client's ceiling is the broker's), and ``ordo testbed up`` where the operator
and pods are needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ordo_testbed.bed import parse_shell_lines
from ordo_testbed.kafka import KafkaBroker


@contextmanager
def kafka_bootstrap() -> Iterator[str]:
    """``ORDO_BENCH_BOOTSTRAP`` (a Kafka of your own) or a single-node Apache Kafka started for
    this benchmark, clients straight to the broker."""
    if os.environ.get("ORDO_BENCH_BOOTSTRAP"):
        yield os.environ["ORDO_BENCH_BOOTSTRAP"]
        return
    with KafkaBroker() as broker:
        yield broker.direct_bootstrap


@contextmanager
def full_testbed(state_dir: Path) -> Iterator[tuple[str, Path]]:
    """``ordo testbed up`` in its own process: (Kafka bootstrap, kubeconfig path). The bootstrap is
    the broker itself: what is measured is ordo on Kafka, not the fault proxy (a Python process
    that, with 4 producers at 40k records/s, tripled the fence's flush)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ordo.cli", "testbed", "up", "--kafka-port", "0", "--kube-port", "0",
         "--state-dir", str(state_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        found: dict[str, str] = {}
        while not {"KAFKA_DIRECT_BOOTSTRAP", "KUBECONFIG"} <= found.keys():
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(f"ordo testbed up ended before it was ready (exit {process.wait()})")
            found.update(parse_shell_lines([line]))
        yield found["KAFKA_DIRECT_BOOTSTRAP"], Path(found["KUBECONFIG"])
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
