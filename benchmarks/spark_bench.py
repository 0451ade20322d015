"""The ordo-kafka Spark source: gated vs the same source with the gate off, side by side.

A stable topic of 8 partitions that ordo expanded from 4 (so every batch plans through the epoch
log and the gate, and every gate is open); 300k records of 100 B; Trigger.AvailableNow with
50k records per batch into Spark's ``noop`` sink; a gated and an ungated query run at the same
time, so the load of a shared machine falls on both alike.
Reports records/s of both (rows over the time spent in batches: query start-up is left out),
their ratio, and the driver's planning time per batch (``latestOffset``: watermarks, the epoch
log read, the gate).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo.topics import await_served

from ._result import Result
from ._testbed import kafka_bootstrap

RECORDS = 300_000
PER_BATCH = 50_000
ROUNDS = 5


def _prepare(bootstrap: str) -> tuple[str, str]:
    topic, epochs = "spark-bench", "spark-bench-epochs"
    ensure_log_topics(AdminClient({"bootstrap.servers": bootstrap}), epochs, "spark-bench-producers")
    fill_expanded_topic(bootstrap, topic, 8, epochs, RECORDS)
    return topic, epochs


def fill_expanded_topic(bootstrap: str, topic: str, partitions: int, epochs: str, records: int) -> None:
    """A topic of ``partitions`` that ordo grew from half while it was empty (a stable topic whose
    gates are all open, so every batch plans through the epoch log and the gate), then
    ``records`` records of 100 B over 10,000 keys."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(120)
    await_served(admin, topic, partitions, 120)
    half = partitions // 2
    history = EpochHistory.initial(topic, half).begin_fence(partitions).publish(dict.fromkeys(range(half), 0))
    writer = EpochLogWriter({"bootstrap.servers": bootstrap}, epochs)
    writer.write(history)
    writer.close()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "partitioner": "murmur2_random"})
    value = b"x" * 100
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, key=f"k{i % 10_000}".encode())
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def _start(spark: Any, bootstrap: str, topic: str, epochs: str, gate: bool, workdir: str) -> Any:
    return start_noop_query(
        spark, bootstrap, topic, workdir,
        maxRecordsPerTrigger=str(PER_BATCH), epochTopic=epochs, gate=str(gate).lower(),
    )  # fmt: skip


def start_noop_query(spark: Any, bootstrap: str, topic: str, workdir: str, **options: str) -> Any:
    """An ordo-kafka stream of ``topic`` from its earliest offsets into Spark's ``noop`` sink,
    Trigger.AvailableNow, with the source's ``options``."""
    reader = (
        spark.readStream.format("ordo-kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return (
        reader.load()
        .writeStream.format("noop")
        .trigger(availableNow=True)
        .option("checkpointLocation", tempfile.mkdtemp(dir=workdir))
        .start()
    )


def _measure(query: Any) -> dict[str, float]:
    query.awaitTermination()
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    assert rows == RECORDS, f"read {rows} of {RECORDS}"
    busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    return {
        "rate": rows / busy,
        "plan_ms": statistics.mean(p["durationMs"].get("latestOffset", 0) for p in progress),
        "batch_ms": statistics.mean(p["durationMs"]["triggerExecution"] for p in progress),
    }


def _pair(spark: Any, bootstrap: str, topic: str, epochs: str, workdir: str) -> tuple[dict[str, float], ...]:
    """A gated and an ungated query at the same time: the machine's load falls on both alike."""
    gated = _start(spark, bootstrap, topic, epochs, True, workdir)
    plain = _start(spark, bootstrap, topic, epochs, False, workdir)
    result = _measure(gated), _measure(plain)
    print(f"  gated {result[0]['rate']:,.0f} rec/s, gate off {result[1]['rate']:,.0f} rec/s", flush=True)
    return result


def local_session(name: str) -> Any:
    """A local[2] SparkSession, quiet, with the ordo-kafka source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import ordo_spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    ordo_spark.register(spark)
    return spark


def run() -> list[Result]:
    with kafka_bootstrap() as bootstrap, tempfile.TemporaryDirectory() as workdir:
        topic, epochs = _prepare(bootstrap)
        spark = local_session("ordo-spark-bench")
        try:
            _pair(spark, bootstrap, topic, epochs, workdir)  # warm the JVM and the Python workers
            pairs = [_pair(spark, bootstrap, topic, epochs, workdir) for _ in range(ROUNDS)]
            gated = [g for g, _ in pairs]
            plain = [p for _, p in pairs]
        finally:
            spark.stop()

    def median(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    return [
        Result(
            "Spark ordo-kafka source, gated vs gate off, stable 8-partition topic, run together (noop sink)",
            median(gated, "rate"),
            median(plain, "rate"),
            "rec/s",
            ">= 0.9",
        ),
        Result(
            "Spark source: driver planning per batch (latestOffset), gated vs gate off",
            median(gated, "plan_ms"),
            median(plain, "plan_ms"),
            "ms",
        ),
        Result.absolute(
            f"Spark source: micro-batch of {PER_BATCH // 1000}k records, gated (trigger to commit)",
            median(gated, "batch_ms"),
            "ms",
        ),
    ]


if __name__ == "__main__":
    for result in run():
        print(f"{result.name}: {result.ordo_text} vs {result.baseline_text} (ratio {result.ratio:.2f})")
