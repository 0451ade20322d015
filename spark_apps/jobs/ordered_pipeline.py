"""Spark job: the ordered per-key pipeline (sequence checks per key) from Kafka to Parquet.

    spark-submit ordered_pipeline.py --topic orders --output /data/checks \
        --checkpoint /data/checkpoints/checks

Kafka settings come from ``ORDO_KAFKA_BOOTSTRAP`` and the other ``ORDO_KAFKA_*`` variables
(the Secret ``ordo-spark-kafka``; spark_apps/README.md), or ``--bootstrap``.
"""

from __future__ import annotations

import argparse
import sys

from ordo_spark.apps import job_parser, open_stream
from ordo_spark.pipeline import ordered_pipeline


def build_parser() -> argparse.ArgumentParser:
    parser = job_parser("ordered_pipeline.py")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True, help="Parquet directory")
    parser.add_argument("--no-gate", action="store_true", help="read without the ordering gate (a control)")
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    gate = "false" if args.no_gate else "true"
    stream, _ = open_stream("ordo-ordered-pipeline", args, args.topic, gate=gate)
    writer = (
        ordered_pipeline(stream)
        .writeStream.format("parquet")
        .outputMode("append")
        .option("path", args.output)
        .option("checkpointLocation", args.checkpoint)
        .queryName("ordo-ordered-pipeline")
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    writer.start().awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
