"""An ordered per-key pipeline: each key's records carry a sequence number 0, 1, 2, ...; a
stateful step (``applyInPandasWithState``) checks each against the key's last one and marks it
``ok``, ``gap`` (numbers skipped: lost or late) or ``inversion`` (a number at or below the last:
reordered or repeated). Reordering by an expansion makes this pipeline's result wrong, so it is
the test of the ordering gate. Values are the scenario workload's records (``{"k": key, "s": n}``).

The step sorts a key's records of a batch by offset: the Kafka assumption that a key lives in one
partition. Through the gate that holds within a batch (two epochs of a key never share one);
without it, an expansion breaks it, and the check sees the result.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "OUTPUT_SCHEMA",
    "STATE_SCHEMA",
    "PipelineReport",
    "check_sequences",
    "ordered_pipeline",
    "summarize",
]

OUTPUT_SCHEMA = (
    "key STRING, seq BIGINT, expected BIGINT, partition INT, offset BIGINT, epoch INT, status STRING"
)
STATE_SCHEMA = "last BIGINT"


def check_sequences(
    key: tuple[Any, ...], batches: Iterator[pd.DataFrame], state: Any
) -> Iterator[pd.DataFrame]:
    """The stateful step for one key in one micro-batch; ``state`` holds the last number seen."""
    frames = [frame for frame in batches if len(frame)]
    if not frames:
        return
    rows = frames[0] if len(frames) == 1 else pd.concat(frames)
    rows = rows.sort_values("offset", kind="stable")
    seq = rows["seq"].to_numpy(dtype=np.int64)
    last = int(state.get[0]) if state.exists else -1
    # the highest number seen before each record: what it is checked against
    highest = np.maximum.accumulate(np.concatenate(([last], seq)))
    expected = highest[:-1] + 1
    status = np.where(seq == expected, "ok", np.where(seq > expected, "gap", "inversion"))
    state.update((int(highest[-1]),))
    yield pd.DataFrame(
        {
            "key": key[0],
            "seq": seq,
            "expected": expected,
            "partition": rows["partition"].to_numpy(),
            "offset": rows["offset"].to_numpy(),
            "epoch": rows["epoch"].to_numpy(),
            "status": status,
        }
    )


def ordered_pipeline(stream: Any) -> Any:
    """The pipeline over an ``ordo-kafka`` stream (a streaming DataFrame)."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    text = F.col("value").cast("string")
    records = stream.select(
        F.get_json_object(text, "$.k").alias("key"),
        F.get_json_object(text, "$.s").cast("long").alias("seq"),
        "partition",
        "offset",
        "epoch",
    )
    return records.groupBy("key").applyInPandasWithState(
        check_sequences, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
    )


@dataclass(frozen=True)
class PipelineReport:
    rows: int
    distinct: int
    gaps: int
    inversions: int

    @property
    def violations(self) -> int:
        return self.gaps + self.inversions

    def lost(self, delivered: Mapping[str, int]) -> int:
        """Records delivered (key → count of numbers 0..n-1) that the output never saw."""
        return sum(delivered.values()) - self.distinct


def summarize(spark: Any, path: str) -> PipelineReport:
    """Count the pipeline's Parquet output (read through Spark, so only committed files count)."""
    frame = spark.read.parquet(path)
    counts = {
        row["status"]: row["n"]
        for row in frame.groupBy("status").count().withColumnRenamed("count", "n").collect()
    }
    distinct = frame.select("key", "seq").distinct().count()
    return PipelineReport(sum(counts.values()), distinct, counts.get("gap", 0), counts.get("inversion", 0))
