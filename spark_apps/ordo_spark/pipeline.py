"""An ordered per-key pipeline: each key's records carry a sequence number 0, 1, 2, ...; a
stateful step (``applyInPandasWithState``) checks each against the highest number of its key seen
before it and marks it ``ok``, ``gap`` (numbers skipped: lost or late) or ``inversion`` (a number
at or below that: reordered or repeated). Reordering by an expansion makes this pipeline's result
wrong, so it is the test of the ordering gate. Values are the scenario workload's records
(``{"k": key, "s": n}``).

The step sorts a key's records of a batch by offset: the Kafka assumption that a key lives in one
partition. Through the gate that holds within a batch (two epochs of a key never share one);
without it, an expansion breaks it, and the check sees the result.

The step groups by a bucket of the key (``BUCKETS`` of them), not by the key: one Python call per
key per batch held 100,000 keys to ~800 records/s; a bucket checks its keys at once with numpy and
keeps their last numbers in one state. ``check_sequences`` is the per-key step it replaced, kept
as the reference the tests and the benchmark compare with.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "BUCKETS",
    "BUCKET_STATE_SCHEMA",
    "OUTPUT_SCHEMA",
    "STATE_SCHEMA",
    "PipelineReport",
    "check_buckets",
    "check_rows",
    "check_sequences",
    "ordered_pipeline",
    "sequence_records",
    "summarize",
]

OUTPUT_SCHEMA = (
    "key STRING, seq BIGINT, expected BIGINT, partition INT, offset BIGINT, epoch INT, status STRING"
)
STATE_SCHEMA = "last BIGINT"
"""``check_sequences``'s state: the key's highest number."""
BUCKET_STATE_SCHEMA = "lasts STRING"
"""``check_buckets``' state: its keys' highest numbers, as JSON ``[[key, ...], [last, ...]]``."""
BUCKETS = 64
"""Keys are hashed into this many groups. It is part of the checkpoint: changing it moves keys
between buckets, away from their state."""
_STATUS = np.array(["ok", "gap", "inversion"], dtype=object)


def _batch_rows(batches: Iterator[pd.DataFrame]) -> pd.DataFrame | None:
    """A group's rows of one micro-batch in one frame; None when it has none."""
    frames = [frame for frame in batches if len(frame)]
    if not frames:
        return None
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def check_sequences(
    key: tuple[Any, ...], batches: Iterator[pd.DataFrame], state: Any
) -> Iterator[pd.DataFrame]:
    """The stateful step for one key in one micro-batch; ``state`` holds the last number seen."""
    rows = _batch_rows(batches)
    if rows is None:
        return
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


def check_rows(rows: pd.DataFrame, lasts: dict[Any, int]) -> pd.DataFrame:
    """``check_sequences`` for many keys at once: each key's rows in offset order, checked against
    the highest number before them (``lasts``, updated in place, or -1 for a new key)."""
    keys = rows["key"].to_numpy(dtype=object)
    codes, found = pd.factorize(keys, use_na_sentinel=False)
    uniques = [None if pd.isna(key) else key for key in found]  # a null key: None, as Spark gives it
    order = np.lexsort((rows["offset"].to_numpy(), codes))  # stable: ties keep their arrival order
    codes = codes[order]
    seq = rows["seq"].to_numpy(dtype=np.int64)[order]
    prior = np.array([lasts.get(key, -1) for key in uniques], dtype=np.int64)
    # the highest number of the key up to each row (inclusive), then the one before each row
    running = pd.Series(seq).groupby(codes).cummax().to_numpy(dtype=np.int64)
    first = np.ones(len(seq), dtype=bool)
    first[1:] = codes[1:] != codes[:-1]
    before = np.empty_like(running)
    before[1:] = running[:-1]
    before[first] = np.iinfo(np.int64).min
    expected = np.maximum(before, prior[codes]) + 1
    status = _STATUS[np.where(seq == expected, 0, np.where(seq > expected, 1, 2))]
    last_rows = np.flatnonzero(np.append(first[1:], True))
    for code, highest in zip(codes[last_rows].tolist(), running[last_rows].tolist(), strict=True):
        lasts[uniques[code]] = max(highest, int(prior[code]))
    return pd.DataFrame(
        {
            "key": keys[order],
            "seq": seq,
            "expected": expected,
            "partition": rows["partition"].to_numpy()[order],
            "offset": rows["offset"].to_numpy()[order],
            "epoch": rows["epoch"].to_numpy()[order],
            "status": status,
        }
    )


def check_buckets(
    bucket: tuple[Any, ...], batches: Iterator[pd.DataFrame], state: Any
) -> Iterator[pd.DataFrame]:
    """The stateful step for one bucket of keys in one micro-batch."""
    rows = _batch_rows(batches)
    if rows is None:
        return
    keys, highest = json.loads(state.get[0]) if state.exists else ([], [])
    lasts = dict(zip(keys, highest, strict=True))
    checked = check_rows(rows, lasts)
    state.update((json.dumps([list(lasts), list(lasts.values())], separators=(",", ":")),))
    yield checked


def sequence_records(stream: Any) -> Any:
    """An ``ordo-kafka`` stream's records as (key, seq, partition, offset, epoch)."""
    from pyspark.sql import functions as F

    text = F.col("value").cast("string")
    return stream.select(
        F.get_json_object(text, "$.k").alias("key"),
        F.get_json_object(text, "$.s").cast("long").alias("seq"),
        "partition",
        "offset",
        "epoch",
    )


def ordered_pipeline(stream: Any) -> Any:
    """The pipeline over an ``ordo-kafka`` stream (a streaming DataFrame)."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    bucketed = sequence_records(stream).withColumn("bucket", F.pmod(F.hash("key"), F.lit(BUCKETS)))
    return bucketed.groupBy("bucket").applyInPandasWithState(
        check_buckets, OUTPUT_SCHEMA, BUCKET_STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
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
