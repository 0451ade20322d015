"""``ordo sandbox --autoscale``: the topic grows by itself while the load ramps.

The same testbed, operator, GatedConsumers and Spark pipeline as the default sandbox; instead of a
ProducerGroup copying a SQLite source and a person's 4 → 8 expansion, OrderedProducer load
generators (:mod:`ordo_sandbox.scenario.ramp_producer`, their C path, each a process of its own)
ramp the rate over many keys, and a TopicAutoscaler decides when the topic grows. Each growth is
timed from its decision to the first record of a new partition the GatedConsumers and the Spark
pipeline read; the independent verifier checks Kafka's contents, the consumers' logs and Spark's.
"""

from __future__ import annotations

import subprocess
import sys
import time
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path

from rich.console import Console

from ordo.api import API_GROUP
from ordo.api.common import VERSION
from ordo.verify import check_topic, read_epochs, read_topic
from ordo_sandbox.autoscale_report import AutoscaleReport
from ordo_sandbox.ramp import AutoscaleSettings, Growth, Ramp, first_reads, peak_rate
from ordo_sandbox.run import NAMESPACE, TOPIC_PARTITIONS, Options, Sandbox, _terminate
from ordo_sandbox.scenario.verify import read_delivered, read_processed, verify
from ordo_sandbox.stages import resource_prefix
from ordo_testbed.records import RECORDS
from ordo_testbed.resources import Autoscalers, Expansions
from ordo_testbed.waiting import wait_for

__all__ = ["AutoscaleSandbox"]


class AutoscaleSandbox(Sandbox):
    def __init__(
        self, options: Options, ramp: Ramp, settings: AutoscaleSettings, console: Console | None = None
    ) -> None:
        super().__init__(options, console)
        self.ramp, self.settings = ramp, settings
        self.stages, self.unit = (), "records"
        self.autoscaler = resource_prefix(options.topic)
        self.producers: list[tuple[subprocess.Popen[bytes], Path, Path]] = []
        self._flow_wall = time.time()
        self.monitor.snapshot.source_label = "records produced"

    def run(self) -> AutoscaleReport:  # type: ignore[override]
        with ExitStack() as stack:
            api, operator, _ = self._bring_up(stack)
            self.expansions = Expansions(api["custom"], NAMESPACE)
            autoscalers = Autoscalers(api["custom"], NAMESPACE)
            autoscalers.create(self.autoscaler, self.settings.spec(self.o.topic))
            if self.o.kubeconfig is not None:  # a real cluster is left as found (its expansions go too)
                stack.callback(autoscalers.delete, self.autoscaler)
            wait_for(
                lambda: (autoscalers.get(self.autoscaler).get("status") or {}).get("currentPartitions"),
                60, f"the operator{' in ' + operator if operator else ''} to measure the topic", step=0.5,
            )  # fmt: skip
            s = self.settings
            self._say(
                f"TopicAutoscaler {self.autoscaler}: {s.min_partitions}..{s.max_partitions} partitions, "
                f"{s.target:g} records/s per partition, window {s.window} s, cooldown {s.cooldown} s"
            )
            self.sources.autoscalers, self.sources.autoscaler = autoscalers, self.autoscaler
            self.sources.expansions, self.sources.expansion = self.expansions, ""
            self._start_consumers(stack)
            self._start_spark(stack)
            self._await_spark()
            self._start_producers(stack)
            self._flow, self._flow_wall = time.monotonic(), time.time()
            self.sources.source_orders = self._sent
            self.monitor.start()
            stack.callback(self.monitor.stop)
            with self._view():
                for process, _, _ in self.producers:
                    process.wait(self.ramp.total_seconds + 180)
                produced = self._produced()
                self._say(f"the load stopped: {produced:,} records produced")
                self._drain(produced)
            return self._report_autoscale(produced)
        raise AssertionError("unreachable")  # ExitStack does not swallow exceptions

    def _next_text(self) -> str:
        elapsed = time.monotonic() - self._flow
        if elapsed < self.ramp.total_seconds:
            rate = self.ramp.rate_at(elapsed)
            return f"load {rate:,.0f} records/s, ends in {self.ramp.total_seconds - elapsed:.0f} s"
        return "draining and verifying"

    def _await_spark(self) -> None:
        """The load starts once the Spark query runs: its JVM's start is no part of a growth's delay."""
        spark = self.spark
        if spark is None:
            return
        try:
            wait_for(lambda: spark.started() or not spark.running, 300, "the Spark query to start", step=1.0)
        except AssertionError:
            self._say("[yellow]the Spark query did not start within 300 s: the load starts anyway[/yellow]")
            return
        if not spark.running:
            raise RuntimeError(f"the Spark pipeline ended at its start: see {spark.directory / 'spark.log'}")
        self._say("the Spark query runs")

    # --- the load -----------------------------------------------------------------------------

    def _start_producers(self, stack: ExitStack) -> None:
        count = self.o.load_generators
        share = self.ramp.share(count)
        for i in range(count):
            out, progress = self.workdir / f"producer-{i}.keys", self.workdir / f"producer-{i}.progress"
            err = self.workdir / f"producer-{i}.err"
            argv = [sys.executable, "-m", "ordo_sandbox.scenario.ramp_producer",
                    "--kafka-config", str(self.kafka_file), "--topic", self.o.topic, "--id", str(i),
                    "--keys", str(max(1, self.o.keys // count)), "--start", str(share.start),
                    "--end", str(share.end), "--seconds", str(share.seconds), "--hold", str(share.hold),
                    "--out", str(out), "--progress", str(progress)]  # fmt: skip
            process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err.open("ab"))
            stack.callback(_terminate, process)
            self.producers.append((process, out, progress))
        for i, (process, _, _) in enumerate(self.producers):
            assert process.stdout is not None
            if process.stdout.readline().strip() != b"ready":
                why = (self.workdir / f"producer-{i}.err").read_text(errors="replace")[-500:]
                raise RuntimeError(f"load generator {i} did not start: {why}")
        self._say(f"{count} OrderedProducer load generators: {self.ramp.start:,.0f} → {self.ramp.end:,.0f} "
                  f"records/s over {self.ramp.seconds:g} s, then {self.ramp.hold:g} s at the end rate, "
                  f"{self.o.keys:,} keys")  # fmt: skip

    def _sent(self) -> int:
        """Records the load generators produced so far (their last "sent N" lines)."""
        total = 0
        for _, _, progress in self.producers:
            try:
                lines = progress.read_text().split()
            except FileNotFoundError:
                continue
            total += int(lines[-1]) if lines else 0
        return total

    def _produced(self) -> int:
        for i, (process, _, _) in enumerate(self.producers):
            if process.returncode != 0:
                why = (self.workdir / f"producer-{i}.err").read_text(errors="replace")[-500:]
                raise RuntimeError(f"load generator {i} failed ({process.returncode}): {why}")
        return sum(read_delivered([out for _, out, _ in self.producers]).values())

    # --- the report ---------------------------------------------------------------------------

    def _growths(self) -> list[Growth]:
        """Each expansion the autoscaler created, with its decision's time (the status's
        lastDecision as the monitor saw it; the expansion's creation when it missed one)."""
        listed = self.expansions.api.list_namespaced_custom_object(
            API_GROUP, VERSION, NAMESPACE, "orderedtopicexpansions"
        )["items"]
        growths = []
        for item in listed:
            name, status = item["metadata"]["name"], item.get("status") or {}
            owners = [o["name"] for o in item["metadata"].get("ownerReferences") or []]
            if self.autoscaler not in owners:
                continue
            decision = self.monitor.decisions.get(name) or {}
            decided = self._after_flow(decision.get("time") or item["metadata"]["creationTimestamp"])
            completed = None
            if status.get("phase") == "Completed" and status.get("startedAt"):
                completed = self._after_flow(status["startedAt"]) + float(status.get("durationSeconds") or 0)
            growths.append(Growth(
                int(status.get("fromPartitions") or decision.get("fromPartitions") or 0),
                int(status.get("toPartitions") or item["spec"]["partitions"]),
                round(decided, 2), str(decision.get("reason") or ""), name,
                None if completed is None else round(completed, 2),
            ))  # fmt: skip
        for growth in growths:
            growth.crossed_at = self.ramp.when(growth.from_partitions * self.settings.target)
        return sorted(growths, key=lambda g: g.to_partitions)

    def _after_flow(self, rfc3339: str) -> float:
        return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp() - self._flow_wall

    def _report_autoscale(self, produced: int) -> AutoscaleReport:
        self._say("verifying")
        for process in self.consumers:
            _terminate(process)
        config = dict(self.kafka)
        expected = read_delivered([out for _, out, _ in self.producers])
        read = read_topic(config, self.o.topic, layout=RECORDS)
        records, epochs = read.records, read_epochs(config, self.o.topic)
        kafka = check_topic(self.o.topic, records, epochs, expected, read.unreadable)
        logs = list(self.sources.consumer_logs.values())
        consumers = verify(expected, logs)
        missing = set(consumers.missing)
        places = {(r.key, r.seq): f"p{r.partition}@{r.offset}" for r in records if (r.key, r.seq) in missing}
        lost_at = [f"{k} #{n} at {places.get((k, n), 'no place in Kafka')}" for k, n in consumers.missing]
        growths = self._growths()
        reads = ((r.at_ns / 1e9 - self._flow, r.partition) for log in logs for r in read_processed(log))
        for growth, at in zip(growths, first_reads(growths, reads), strict=True):
            growth.consumers_at = None if at is None else round(at, 2)
        spark = None
        if self.spark is not None:
            self.spark.stop()
            spark = self.spark.outcome()
            spark_reads = [(at - self._flow_wall, p) for at, p in self.spark.partition_reads()]
            for growth, at in zip(growths, first_reads(growths, spark_reads), strict=True):
                growth.spark_at = None if at is None else round(at, 2)
        self.monitor.refresh()
        partitions = max(
            (g.to_partitions for g in growths if g.completed_at is not None), default=TOPIC_PARTITIONS
        )
        return AutoscaleReport(
            seconds=self.ramp.total_seconds, start_rate=self.ramp.start, end_rate=self.ramp.end,
            keys=self.o.keys, produced=produced, peak_rate=round(peak_rate(self.monitor.history), 1),
            target=self.settings.target, partitions=(TOPIC_PARTITIONS, partitions), kafka=kafka,
            consumers=consumers, growths=growths, spark=spark, spark_skipped=self.spark_skipped,
            workdir=str(self.workdir), lost_at=lost_at,
        )  # fmt: skip
