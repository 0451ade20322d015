"""Spark job: the ordered per-key pipeline (sequence checks per key) from Kafka to Parquet.

    spark-submit ordered_pipeline.py --topic orders --output s3a://bucket/checks \
        --checkpoint s3a://bucket/checkpoints/checks

Kafka settings come from ``KAFKA_*`` environment variables (``KAFKA_BOOTSTRAP_SERVERS``, and the
Secret's ``KAFKA_SASL_USERNAME`` etc.), or ``--bootstrap``.
"""

from __future__ import annotations

import argparse
import sys

from ordo_spark.apps import kafka_config_from_env, session, source_options
from ordo_spark.pipeline import ordered_pipeline


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ordered_pipeline.py")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True, help="Parquet directory")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--bootstrap", help="overrides KAFKA_BOOTSTRAP_SERVERS")
    parser.add_argument("--epoch-topic", default="__ordo_epochs")
    parser.add_argument("--max-records-per-trigger", type=int, default=100_000)
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--no-gate", action="store_true", help="read without the ordering gate (a control)")
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    kafka = kafka_config_from_env()
    if args.bootstrap:
        kafka["bootstrap.servers"] = args.bootstrap
    spark = session("ordo-ordered-pipeline")
    options = source_options(
        kafka,
        subscribe=args.topic,
        startingOffsets=args.starting_offsets,
        maxRecordsPerTrigger=str(args.max_records_per_trigger),
        epochTopic=args.epoch_topic,
        gate="false" if args.no_gate else "true",
    )
    stream = spark.readStream.format("ordo-kafka").options(**options).load()
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
