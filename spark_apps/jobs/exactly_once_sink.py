"""Spark job: copy (or transform) an ordo-kafka stream to another topic exactly once.

    spark-submit exactly_once_sink.py --input orders --output orders-copy \
        --checkpoint s3a://bucket/checkpoints/copy --sink-id orders-copy

Each batch part is written in one Kafka transaction tagged with the batch id, so a batch that
Spark replays after a failure is not written twice. Keep ``--sink-id`` stable across restarts.
Kafka settings come from ``KAFKA_*`` environment variables, or ``--bootstrap``.
"""

from __future__ import annotations

import argparse
import sys

from ordo_spark.apps import kafka_config_from_env, session, source_options
from ordo_spark.sink import ExactlyOnceKafkaSink


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="exactly_once_sink.py")
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--sink-id", required=True, help="stable across restarts, unique per query")
    parser.add_argument("--bootstrap", help="overrides KAFKA_BOOTSTRAP_SERVERS")
    parser.add_argument("--epoch-topic", default="__ordo_epochs")
    parser.add_argument("--max-records-per-trigger", type=int, default=100_000)
    parser.add_argument("--starting-offsets", default="earliest")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    kafka = kafka_config_from_env()
    if args.bootstrap:
        kafka["bootstrap.servers"] = args.bootstrap
    spark = session("ordo-exactly-once-sink")
    options = source_options(
        kafka,
        subscribe=args.input,
        startingOffsets=args.starting_offsets,
        maxRecordsPerTrigger=str(args.max_records_per_trigger),
        epochTopic=args.epoch_topic,
    )
    stream = spark.readStream.format("ordo-kafka").options(**options).load()
    sink = ExactlyOnceKafkaSink(args.output, kafka, args.sink_id)
    query = (
        stream.select("key", "value")
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", args.checkpoint)
        .queryName("ordo-exactly-once-sink")
        .start()
    )
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
