"""The Spark ordered pipeline (``spark_apps/jobs/ordered_pipeline.py``) as a local job: it reads the
topic through the ``ordo-kafka`` gated source and checks each key's numbers with per-key state,
into Parquet. Its committed output (the files the streaming sink's log lists) is what is counted."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

from ordo_sandbox.kafka_settings import Kafka, environment, settings_of
from ordo_sandbox.report import SparkOutcome

__all__ = ["SparkPipeline", "job_path", "unavailable"]


def job_path() -> Path | None:
    """The pipeline job of this checkout (the job files are not part of the installed package)."""
    path = Path(__file__).resolve().parents[2] / "spark_apps" / "jobs" / "ordered_pipeline.py"
    return path if path.is_file() else None


def unavailable() -> str:
    """Why the pipeline cannot run here ("" when it can)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime (Spark needs Java 17+)"
    for module in ("pyspark", "ordo_spark", "pandas", "pyarrow"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (from a checkout: pip install -e spark_apps)"
    if job_path() is None:
        return "spark_apps/jobs is not here (run from a checkout of ordo)"
    return ""


class SparkPipeline:
    def __init__(self, directory: Path, kafka: Kafka, topic: str, max_per_trigger: int = 5000) -> None:
        """``kafka``: a bootstrap or the connection's settings, given to the job in its environment
        (``ORDO_KAFKA_BOOTSTRAP``, ``ORDO_KAFKA_OPTIONS``: what ``ordo_spark`` reads)."""
        self.directory = directory
        self.output = directory / "checks"
        self.kafka, self.topic = settings_of(kafka), topic
        self.max_per_trigger = max_per_trigger
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> SparkPipeline:
        job = job_path()
        assert job is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            **environment(self.kafka),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            # two cores and a few shuffle partitions: the sandbox shares the machine with the rest
            "PYSPARK_SUBMIT_ARGS": "--master local[2] --conf spark.sql.shuffle.partitions=2 "
            "--conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false pyspark-shell",
        }
        argv = [sys.executable, str(job), "--topic", self.topic, "--output", str(self.output),
                "--checkpoint", str(self.directory / "checkpoint"),
                "--max-records-per-trigger", str(self.max_per_trigger)]  # fmt: skip
        self._log = (self.directory / "spark.log").open("ab")
        self.process = subprocess.Popen(argv, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        return self

    def started(self) -> bool:
        """The streaming query started (its checkpoint's metadata is written): batches follow."""
        return (self.directory / "checkpoint" / "metadata").is_file()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def committed_files(self) -> list[Path]:
        """The Parquet files of committed batches, from the file sink's log (``_spark_metadata``)."""
        return [path for path, _ in self.committed_entries()]

    def committed_entries(self) -> list[tuple[Path, float]]:
        """(Parquet file, when it was written: seconds since the epoch) of committed batches."""
        log = self.output / "_spark_metadata"
        if not log.is_dir():
            return []
        # Every few batches Spark writes "<n>.compact", listing all files up to batch n; the
        # batches after it have their own entries. Older entries may linger: they are skipped.
        entries: dict[int, Path] = {}
        compact = -1
        for entry in log.iterdir():
            name = entry.name.removesuffix(".compact")
            if name.isdigit():
                entries[int(name)] = entry
                if entry.name.endswith(".compact"):
                    compact = max(compact, int(name))
        files: list[tuple[Path, float]] = []
        for batch in sorted(b for b in entries if b >= compact):
            for line in entries[batch].read_text().splitlines()[1:]:  # the first line: log version
                entry = json.loads(line)
                files.append((Path(entry["path"].removeprefix("file://")), entry["modificationTime"] / 1000))
        return files

    def partition_reads(self) -> list[tuple[float, int]]:
        """(when its file was written, partition) for each Kafka partition of each committed file:
        when the pipeline had read and processed records of that partition."""
        import pyarrow.parquet as pq

        reads = []
        for path, written in self.committed_entries():
            partitions = pq.read_table(path, columns=["partition"]).column("partition").to_pylist()
            reads += [(written, int(p)) for p in set(partitions)]
        return reads

    def rows(self) -> int | None:
        """Rows committed so far (None before the first batch)."""
        import pyarrow.parquet as pq

        files = self.committed_files()
        return sum(pq.ParquetFile(f).metadata.num_rows for f in files) if files else None

    def outcome(self) -> SparkOutcome:
        import pandas as pd

        files = self.committed_files()
        if not files:
            return SparkOutcome(0, 0, 0, 0)
        frame = pd.concat([pd.read_parquet(f, columns=["key", "seq", "status"]) for f in files])
        counts = frame["status"].value_counts()
        distinct = len(frame.drop_duplicates(["key", "seq"]))
        return SparkOutcome(len(frame), distinct, int(counts.get("gap", 0)), int(counts.get("inversion", 0)))

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None
