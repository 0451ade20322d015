"""Start the workload's producers and consumers as processes, stop them, and verify."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ordo.control_topics import DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC
from ordo_sandbox.kafka_settings import Kafka, settings_of, write_settings
from ordo_sandbox.scenario.progress import find_records, partition_progress
from ordo_sandbox.scenario.verify import Verdict, read_acknowledged, read_delivered, read_processed, verify

__all__ = ["Workload"]


class Workload:
    """``producers`` keyed producer processes and ``consumers`` consumer processes on ``topic``."""

    def __init__(
        self,
        kafka: Kafka,
        topic: str,
        directory: Path,
        *,
        producers: int = 4,
        consumers: int = 3,
        keys: int = 1000,
        rate: float = 400.0,
        group: str | None = None,
        plain: bool = False,
        group_protocol: str = "classic",
        epoch_topic: str = DEFAULT_EPOCH_TOPIC,
        registry_topic: str = DEFAULT_REGISTRY_TOPIC,
        producer_options: Sequence[str] = (),
        producer_bootstraps: Sequence[str] = (),
        first_id: int = 0,
    ) -> None:
        """``kafka``: a bootstrap, or the connection's settings (given to the programs in a file
        of ``directory`` readable by its owner alone, :mod:`ordo_sandbox.kafka_settings`);
        ``producer_options``: more of the producer program's options, for every producer;
        ``producer_bootstraps``: producer i's bootstrap (e.g. through a fault proxy), if given;
        ``first_id``: the first producer's number (keys are disjoint per number), so that two
        workloads can write one topic."""
        self.kafka, self.topic, self.directory = settings_of(kafka), topic, directory
        bootstrap = self.bootstrap = self.kafka["bootstrap.servers"]
        self.plain = plain
        self.group = group or f"{topic}-readers"
        directory.mkdir(parents=True, exist_ok=True)
        common = ["--topic", topic, "--epoch-topic", epoch_topic]
        if len(self.kafka) > 1:  # more than a bootstrap: credentials, maybe, and never on a command line
            common += ["--kafka-config", str(write_settings(self.kafka, directory / "kafka.json"))]
        reach = [*producer_bootstraps, *[bootstrap] * (producers - len(producer_bootstraps))]
        self._producer_argv = [
            [*common, "--bootstrap", reach[i], "--id", str(first_id + i), "--keys", str(keys // producers),
             "--rate", str(rate), "--registry-topic", registry_topic, "--out", str(self.delivered_path(i)),
             *producer_options]
            + (["--plain"] if plain else [])
            for i in range(producers)
        ]  # fmt: skip
        common = ["--bootstrap", bootstrap, *common]
        self._consumer_argv = [
            [
                *common,
                "--group",
                self.group,
                "--group-protocol",
                group_protocol,
                "--out",
                str(self.processed_path(i)),
            ]
            # the control: plain consumers that take time per record, so a moved key's old records
            # deep in an old partition's backlog meet its new ones read at once from a new partition
            + (["--plain", "--work-ms", "1"] if plain else [])
            for i in range(consumers)
        ]
        self._spawned = 0
        self.producers: list[subprocess.Popen[str]] = []
        self.consumers: list[subprocess.Popen[str]] = []

    def delivered_path(self, index: int) -> Path:
        return self.directory / f"delivered-{index}.txt"

    def processed_path(self, index: int) -> Path:
        return self.directory / f"consumer-{index}.log"

    def start(self) -> Workload:
        return self.start_consumers().start_producers()

    def start_producers(self) -> Workload:
        self.producers = _ready([self._spawn("producer", argv) for argv in self._producer_argv])
        return self

    def start_consumers(self) -> Workload:
        self.consumers = _ready([self._spawn("consumer", argv) for argv in self._consumer_argv])
        return self

    def _spawn(self, program: str, argv: Sequence[str]) -> subprocess.Popen[str]:
        self._spawned += 1
        return subprocess.Popen(
            [sys.executable, "-m", f"ordo_sandbox.scenario.{program}", *argv],
            stdout=subprocess.PIPE,
            stderr=(self.directory / f"{program}-{self._spawned}.err").open("a"),
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def processed_count(self) -> int:
        """Distinct records the consumers processed (a record processed twice, after a
        rebalance, counts once: counting lines let a drain end with records still unread)."""
        return len(self._processed_set())

    def _processed_set(self) -> set[tuple[str, int]]:
        seen: set[tuple[str, int]] = set()
        for path in self._processed_paths():
            if path.exists():
                seen.update((record.key, record.seq) for record in read_processed(path))
        return seen

    def stop_producers(self) -> int:
        """Stop producing; returns how many records were delivered."""
        _stop(self.producers)
        return sum(read_delivered(self.delivered_paths()).values())

    def delivered_paths(self) -> list[Path]:
        return [self.delivered_path(i) for i in range(len(self.producers))]

    def drain(self, delivered: int, timeout: float = 60.0, every_acknowledged: bool = True) -> bool:
        """Wait until the consumers processed at least ``delivered`` records and (unless
        ``every_acknowledged`` is False) every record the stopped producers' logs list as
        acknowledged; False after ``timeout``. A count alone was met by records processed though
        never acknowledged while acknowledged ones were still held behind a gate."""
        logs = [path for path in self.delivered_paths() if path.exists()]
        acknowledged = set(read_acknowledged(logs)) if every_acknowledged else set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen = self._processed_set()
            if len(seen) >= delivered and acknowledged <= seen:
                return True
            time.sleep(0.2)  # polling the consumers' logs
        return False

    def finish_producing(self, timeout: float = 60.0) -> int:
        """Stop producing and wait until the consumers processed everything delivered; returns
        how many records that is. AssertionError saying why when they do not within ``timeout``."""
        delivered = self.stop_producers()
        if not self.drain(delivered, timeout):
            raise AssertionError(self.why_not_drained(delivered))
        return delivered

    def why_not_drained(self, delivered: int) -> str:
        """What a failed drain needs to be understood: the counts, and each consumer's own last
        words (its closed gates, and every thread's stack, dumped on SIGUSR1)."""
        errs = sorted(self.directory.glob("*.err"))
        sizes = {path: path.stat().st_size for path in errs if path.name.startswith("consumer")}
        for process in self.consumers:
            if process.poll() is None:
                process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and any(p.stat().st_size == n for p, n in sizes.items()):
            time.sleep(0.1)  # until the stacks are written (consumers' files grow), or 3 s
        lines = [f"consumers processed {self.processed_count()} of {delivered} delivered records"]
        lines.append("partitions: " + partition_progress(self.kafka, self.topic, self.group))
        through: dict[int, int] = {}
        for path in self._processed_paths():
            for record in read_processed(path):
                through[record.partition] = max(through.get(record.partition, 0), record.offset + 1)
        lines.append("processed through: " + "; ".join(f"p{p} {o}" for p, o in sorted(through.items())))
        lines += _missing(
            read_delivered(self.delivered_paths()),
            read_acknowledged(self.delivered_paths()),
            self._processed_paths(),
            self._where,
        )
        for path in errs:
            tail = path.read_text(errors="replace").splitlines()[-60:]
            lines += [f"--- {path.name}", *tail]
        return "\n".join(lines)

    def stop(self) -> Verdict:
        _stop(self.producers)
        _stop(self.consumers)
        delivered = read_delivered(self.delivered_paths())
        return verify(delivered, self._processed_paths())

    def _where(self, wanted: set[tuple[str, int]]) -> dict[tuple[str, int], str]:
        return find_records(self.kafka, self.topic, wanted)

    def _processed_paths(self) -> list[Path]:
        return [self.processed_path(i) for i in range(len(self.consumers))]


def _missing(
    delivered: dict[str, int],
    acknowledged: dict[tuple[str, int], str],
    logs: list[Path],
    where: Callable[[set[tuple[str, int]]], dict[tuple[str, int], str]],
    most: int = 10,
) -> list[str]:
    """A few records never processed, each with where the broker acknowledged it, where its key
    was last seen (partition@offset) and where it is in Kafka (``where``: an answer for each
    record asked about)."""
    seen: dict[str, set[int]] = {}
    last: dict[str, str] = {}
    for path in logs:
        for record in read_processed(path):
            seen.setdefault(record.key, set()).add(record.seq)
            last[record.key] = f"p{record.partition}@{record.offset}"
    gaps = [
        (key, seq)
        for key, count in sorted(delivered.items())
        for seq in range(count)
        if seq not in seen.get(key, ())
    ]
    shown = gaps[:most]
    in_kafka = where(set(shown)) if shown else {}
    lines = [
        f"missing {key} #{seq} (acknowledged at {acknowledged.get((key, seq), 'none: never acknowledged')}; "
        f"key last seen at {last.get(key, 'nowhere')}; "
        f"in Kafka at {in_kafka[(key, seq)]})"
        for key, seq in shown
    ]
    return lines + ([f"... and {len(gaps) - most} more"] if len(gaps) > most else [])


def _ready(processes: list[subprocess.Popen[str]]) -> list[subprocess.Popen[str]]:
    """Wait until each program says it is ready (a line on stdout)."""
    for process in processes:
        assert process.stdout is not None
        line = process.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"workload process {process.args!r} did not start: {line!r}")
    return processes


def _stop(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            # a program that does not stop is a finding: its stacks go to its .err file first
            process.send_signal(signal.SIGUSR1)
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
