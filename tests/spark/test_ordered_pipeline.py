"""The ordered per-key pipeline on the ordo-kafka source while the topic grows 3 -> 6 -> 8.

200k numbered records of 300 keys go through OrderedProducer while the real operator expands the
topic; two queries read it side by side: one through the gate, and a control with the gate off.
They start after the first expansion, with a backlog that spans it (so the control is sure to
meet a moved key's old and new records), and the second expansion happens while they run.
The stateful step (applyInPandasWithState) checks every key's sequence. Gated: no gap, no
inversion, nothing lost. Control: inversions, so the check can fail."""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message

from ordo.errors import ProduceBlockedError
from ordo.ordered_producer import OrderedProducer
from ordo_sandbox.scenario.records import Numbered, encode, key_name
from ordo_spark.apps import source_options
from ordo_spark.pipeline import ordered_pipeline, summarize
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions
from ordo_testbed.waiting import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.testbed, pytest.mark.slow]

RECORDS = 200_000
KEYS = 300
STEPS = (6, 8)


class NumberedProducer:
    """Produces RECORDS numbered records on a thread; counts what was delivered. Past ``limit`` it
    only trickles (about 500 records/s, a pace, not a synchronisation), so that an expansion lands
    between the phases of the data however fast this machine produces, while records still flow."""

    def __init__(self, kafka: KafkaHandle, topic: str, epochs: str, registry: str) -> None:
        self.topic = topic
        self.producer = OrderedProducer(
            kafka.config(linger_ms=5), epoch_topic=epochs, registry_topic=registry, session_timeout=3.0
        )
        self.sequence: dict[str, int] = defaultdict(int)
        self.produced = 0
        self.limit = 0
        self.errors: list[KafkaError] = []
        self.thread = threading.Thread(target=self._run, name="numbered-producer", daemon=True)

    def _delivered(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            self.errors.append(error)

    def _run(self) -> None:
        rng = random.Random(7)
        for _ in range(RECORDS):
            record = Numbered(key_name(0, rng.randrange(KEYS)), 0)
            record = Numbered(record.key, self.sequence[record.key])
            while True:
                try:
                    self.producer.produce(
                        self.topic, encode(record), key=record.key.encode(), on_delivery=self._delivered
                    )
                    break
                except BufferError:
                    self.producer.poll(0.05)
                except ProduceBlockedError:
                    continue  # a fence outlasted block_timeout: the same record again, nothing dropped
            self.sequence[record.key] += 1
            self.produced += 1
            if self.produced % 2000 == 0:
                self.producer.poll(0)
            if self.produced >= self.limit:
                time.sleep(0.002)
        assert self.producer.flush(60) == 0

    def finish(self) -> dict[str, int]:
        self.thread.join(120)
        assert not self.thread.is_alive() and not self.errors, self.errors[:3]
        self.producer.close()
        return dict(self.sequence)


def _start(spark: Any, kafka: KafkaHandle, topic: str, epochs: str, directory: Path, gate: bool) -> Any:
    options = source_options(
        {"bootstrap.servers": kafka.bootstrap},
        subscribe=topic,
        startingOffsets="earliest",
        maxRecordsPerTrigger="50000",
        epochTopic=epochs,
        gate=str(gate).lower(),
        maxTasks="3",  # 6 and 8 partitions packed into 3 tasks: order must hold in packed tasks too
    )
    stream = spark.readStream.format("ordo-kafka").options(**options).load()
    return (
        ordered_pipeline(stream)
        .writeStream.format("parquet")
        .outputMode("append")
        .option("path", str(directory / "out"))
        .option("checkpointLocation", str(directory / "checkpoint"))
        .queryName(f"ordered_{'gated' if gate else 'control'}")
        .start()
    )


def test_gated_pipeline_keeps_every_key_in_order_and_the_control_does_not(
    spark: Any,
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
    tmp_path: Path,
) -> None:
    epochs, registry = log_topics
    operator_process().start()
    topic = kafka.create_topic(3)
    expansions = Expansions(kube.custom, kube.namespace)
    started = time.monotonic()
    producer = NumberedProducer(kafka, topic, epochs, registry)
    producer.limit = RECORDS // 3
    producer.thread.start()
    queries: list[Any] = []
    try:
        for step, partitions in enumerate(STEPS, start=1):
            wait_for(lambda: producer.produced >= producer.limit, 120, f"{step}/3 of the records")
            expansions.create(f"grow-to-{partitions}", topic, partitions, fenceTimeoutSeconds=30)
            expansions.wait_phase(f"grow-to-{partitions}", "Completed", 60)
            producer.limit = (step + 1) * RECORDS // 3
            if step == 1:
                wait_for(lambda: producer.produced >= RECORDS // 2, 120, "a backlog past the first expansion")
                queries = [
                    _start(spark, kafka, topic, epochs, tmp_path / "gated", gate=True),
                    _start(spark, kafka, topic, epochs, tmp_path / "control", gate=False),
                ]
        delivered = producer.finish()
        produced_in = time.monotonic() - started
        for query in queries:
            query.processAllAvailable()
        batches = {q.name: q.lastProgress["batchId"] + 1 for q in queries}
    finally:
        for query in queries:
            query.stop()
    elapsed = time.monotonic() - started
    good = summarize(spark, str(tmp_path / "gated" / "out"))
    bad = summarize(spark, str(tmp_path / "control" / "out"))
    print(
        f"\n{RECORDS} records produced in {produced_in:.1f}s; both queries done in {elapsed:.1f}s "
        f"({RECORDS / elapsed:,.0f} rec/s per query), batches {batches}\n"
        f"gated:   {good}\ncontrol: {bad}"
    )
    total = sum(delivered.values())
    assert total == RECORDS
    assert good.violations == 0, good
    assert good.rows == total and good.lost(delivered) == 0, good
    assert bad.lost(delivered) == 0, bad
    assert bad.violations > 0, "the control must show that the check can fail"
    epochs_seen = spark.read.parquet(str(tmp_path / "gated" / "out")).groupBy("epoch").count().collect()
    assert {row["epoch"] for row in epochs_seen} == {0, 1, 2}


def test_the_job_runs_as_spark_submit_would_run_it(
    spark: Any,
    kafka: KafkaHandle,
    log_topics: tuple[str, str],
    tmp_path: Path,
    group_protocol: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """spark_apps/jobs/ordered_pipeline.py's main, with Trigger.AvailableNow, on the same session,
    its clients set for either group protocol (the source assigns partitions itself, as Spark's
    Kafka source does, so it joins no group with either)."""
    import importlib.util

    # a Service named kafka's KAFKA_* variables, which the job must not take for options
    monkeypatch.setenv("KAFKA_PORT", "tcp://10.0.0.12:9092")
    monkeypatch.setenv("KAFKA_SERVICE_HOST", "10.0.0.12")

    topic = kafka.create_topic(3)
    producer = OrderedProducer(
        kafka.config(linger_ms=5), epoch_topic=log_topics[0], registry_topic=log_topics[1]
    )
    for n in range(3000):
        producer.produce(
            topic, encode(Numbered(key_name(1, n % 30), n // 30)), key=key_name(1, n % 30).encode()
        )
    assert producer.flush(30) == 0
    producer.close()
    path = Path(__file__).parents[2] / "spark_apps" / "jobs" / "ordered_pipeline.py"
    spec = importlib.util.spec_from_file_location("ordered_pipeline_job", path)
    assert spec is not None and spec.loader is not None
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    argv = [
        f"--topic={topic}",
        f"--output={tmp_path / 'out'}",
        f"--checkpoint={tmp_path / 'checkpoint'}",
        f"--bootstrap={kafka.bootstrap}",
        f"--epoch-topic={log_topics[0]}",
        "--available-now",
        f"--option=kafka.group.protocol={group_protocol}",
    ]
    assert job.main(argv) == 0
    report = summarize(spark, str(tmp_path / "out"))
    assert (report.rows, report.distinct, report.violations) == (3000, 3000, 0)
