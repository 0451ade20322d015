"""The Spark source in a real Spark session as the topic grows (issue: scale): the same records
(100 B each) in topics of 8, 128 and 1,024 partitions (``ORDO_SCALE=long``: 2,048), each grown by
ordo from half its count (so every batch plans through the epoch log and the gate), read by a
gated query (Trigger.AvailableNow, ``maxRecordsPerTrigger``, Spark's ``noop`` sink, local[2]).

Per partition count: records/s over the time spent in batches, a micro-batch's duration (trigger
to commit) and the driver's planning in it (``latestOffset``). A batch runs at most the source's
``maxTasks`` (16) Spark tasks; with one task per partition, 1,024 partitions took 91 s a batch
(461 rec/s) where 8 took 3.8 s, since PySpark spends 0.1-0.4 s on every task. ``ORDO_SCALE=long``
also reads the largest topic with one task per partition (``maxTasks`` = its partitions).
The planning alone at 2,048 partitions and 100 epochs is in ``scale_bench``; this is the whole
session, executors included.
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import AdminClient

from ordo.epochs.log import ensure_log_topics
from ordo_spark.options import DEFAULT_MAX_TASKS

from ._result import Result
from ._testbed import kafka_bootstrap
from .scale_bench import LONG, growth
from .spark_bench import fill_expanded_topic, local_session, start_noop_query

PARTITIONS = (8, 128, 1_024) + ((2_048,) if LONG else ())
RECORDS = 200_000
PER_BATCH = 50_000
EPOCHS = "scale-spark-epochs"


@dataclass(frozen=True)
class _Size:
    partitions: int
    rate: float  # rec/s over the batches
    batch_ms: float  # median micro-batch, trigger to commit
    plan_ms: float  # median latestOffset
    max_tasks: int


def _prepare(bootstrap: str, partitions: int) -> str:
    topic = f"scale-spark-{partitions}"
    fill_expanded_topic(bootstrap, topic, partitions, EPOCHS, RECORDS)
    return topic


def _read(spark: Any, bootstrap: str, topic: str, workdir: str, max_tasks: int = DEFAULT_MAX_TASKS) -> _Size:
    query = start_noop_query(
        spark, bootstrap, topic, workdir,
        maxRecordsPerTrigger=str(PER_BATCH), epochTopic=EPOCHS, maxTasks=str(max_tasks),
    )  # fmt: skip
    query.awaitTermination()
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    assert rows == RECORDS, f"read {rows} of {RECORDS}"
    busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    return _Size(
        int(topic.rsplit("-", 1)[1]),
        rows / busy,
        statistics.median(p["durationMs"]["triggerExecution"] for p in progress),
        statistics.median(p["durationMs"].get("latestOffset", 0) for p in progress),
        max_tasks,
    )


def run() -> list[Result]:
    with kafka_bootstrap() as bootstrap, tempfile.TemporaryDirectory() as workdir:
        ensure_log_topics(AdminClient({"bootstrap.servers": bootstrap}), EPOCHS, "scale-spark-producers")
        topics = [_prepare(bootstrap, n) for n in PARTITIONS]
        spark = local_session("ordo-scale-spark-bench")
        try:
            _read(spark, bootstrap, topics[0], workdir)  # warm the JVM and the Python workers
            sizes = []
            for topic in topics:
                sizes.append(_read(spark, bootstrap, topic, workdir))
                s = sizes[-1]
                _say(s)
            unpacked = _read(spark, bootstrap, topics[-1], workdir, PARTITIONS[-1]) if LONG else None
            if unpacked is not None:
                _say(unpacked)
        finally:
            spark.stop()
    small, big = sizes[0], sizes[-1]
    k = growth([s.partitions for s in sizes], [s.batch_ms for s in sizes])
    results = [
        Result(
            f"Spark session, gated source: {big.partitions:,} vs {small.partitions} partitions, "
            f"{RECORDS // 1000}k records in batches of {PER_BATCH // 1000}k (batch {big.batch_ms:,.0f} vs "
            f"{small.batch_ms:,.0f} ms, growth in partitions O(n^{k:.2f}); planning {big.plan_ms:,.0f} ms; "
            f"at most {big.max_tasks} tasks a batch)",
            big.rate,
            small.rate,
            "rec/s",
        ),
    ]
    if unpacked is not None:
        results.append(
            Result(
                f"Spark session, {big.partitions:,} partitions: tasks packed (maxTasks {big.max_tasks}) vs "
                f"one task per partition (batch {big.batch_ms:,.0f} vs {unpacked.batch_ms:,.0f} ms)",
                big.rate,
                unpacked.rate,
                "rec/s",
            )
        )
    return results


def _say(s: _Size) -> None:
    print(f"  {s.partitions:>5} partitions, maxTasks {s.max_tasks}: {s.rate:,.0f} rec/s, batch "
          f"{s.batch_ms:,.0f} ms (planning {s.plan_ms:,.0f} ms)", flush=True)  # fmt: skip
