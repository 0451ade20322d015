"""The ordered pipeline's stateful step: bucketed (``check_buckets``, one Python call per bucket
of keys) vs per key (``check_sequences``, one call per key), side by side.

Issue 43's load: 100,000 keys, 10,000 records/s, so a batch of 5 s (50,000 records) touches ~40,000
keys. The input is the workload's JSON records in Parquet files, one file a micro-batch, read as a
stream (no Kafka: the step is what is measured); local[2], 2 shuffle partitions as the sandbox
runs it, Trigger.AvailableNow into Spark's ``noop`` sink. The two run one after the other in one
run (at the same time, the fast one's tasks wait for the slow one's in two task slots); rows over
the time spent in batches after the first (which starts the Python workers).
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from ._result import Result
from .spark_bench import local_session

KEYS = 100_000
PER_BATCH = 50_000
BATCHES = 3  # the first warms up


def _write_input(directory: Path) -> None:
    rng = random.Random(43)
    numbers = [0] * KEYS
    offset = 0
    for batch in range(BATCHES):
        values, offsets = [], []
        for _ in range(PER_BATCH):
            key = rng.randrange(KEYS)
            values.append(json.dumps({"k": f"key-{key}", "s": numbers[key]}).encode())
            numbers[key] += 1
            offsets.append(offset)
            offset += 1
        frame = pd.DataFrame({"value": values, "partition": 0, "offset": offsets, "epoch": 0})
        frame.astype({"partition": "int32", "epoch": "int32"}).to_parquet(directory / f"{batch:03}.parquet")


def _start(spark: Any, source: Path, workdir: str, bucketed: bool) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout

    from ordo_spark.pipeline import (
        OUTPUT_SCHEMA,
        STATE_SCHEMA,
        check_sequences,
        ordered_pipeline,
        sequence_records,
    )

    stream = (
        spark.readStream.schema("value BINARY, partition INT, offset BIGINT, epoch INT")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(source))
    )
    checked = (
        ordered_pipeline(stream)
        if bucketed
        else sequence_records(stream)
        .groupBy("key")
        .applyInPandasWithState(
            check_sequences, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
        )
    )
    return (
        checked.writeStream.format("noop")
        .trigger(availableNow=True)
        .option("checkpointLocation", tempfile.mkdtemp(dir=workdir))
        .start()
    )


def _rate(query: Any) -> tuple[float, list[float]]:
    query.awaitTermination()
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    assert rows == PER_BATCH * BATCHES, f"read {rows} of {PER_BATCH * BATCHES}"
    busy = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    return PER_BATCH * (BATCHES - 1) / sum(busy[1:]), busy


def run() -> list[Result]:
    with tempfile.TemporaryDirectory() as workdir:
        source = Path(workdir) / "input"
        source.mkdir()
        _write_input(source)
        spark = local_session("ordo-spark-pipeline-bench")
        spark.conf.set("spark.sql.shuffle.partitions", "2")
        try:
            new, new_batches = _rate(_start(spark, source, workdir, True))
            old, old_batches = _rate(_start(spark, source, workdir, False))
        finally:
            spark.stop()
    print(
        f"  bucketed {new:,.0f} rows/s (batches {new_batches} s), per key {old:,.0f} rows/s ({old_batches} s)"
    )
    return [
        Result(
            f"Spark ordered pipeline, {KEYS // 1000}k keys, {PER_BATCH // 1000}k-record batches: "
            "bucketed vs per-key step",
            new,
            old,
            "rows/s",
            ">= 5",
        )
    ]


if __name__ == "__main__":
    for result in run():
        print(f"{result.name}: {result.ordo_text} vs {result.baseline_text} (ratio {result.ratio:.2f})")
