"""Spark job: copy (or transform) an ordo-kafka stream to another topic exactly once.

    spark-submit exactly_once_sink.py --input orders --output orders-copy \
        --checkpoint /data/checkpoints/copy --sink-id orders-copy

Each batch part is written in one Kafka transaction tagged with the batch id, so a batch that
Spark replays after a failure is not written twice. Keep ``--sink-id`` stable across restarts.
Kafka settings come from ``ORDO_KAFKA_BOOTSTRAP`` and the other ``ORDO_KAFKA_*`` variables
(the Secret ``ordo-spark-kafka``; spark_apps/README.md), or ``--bootstrap``.
"""

from __future__ import annotations

import argparse
import sys

from ordo_spark.apps import job_parser, open_stream
from ordo_spark.sink import ExactlyOnceKafkaSink


def build_parser() -> argparse.ArgumentParser:
    parser = job_parser("exactly_once_sink.py")
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--sink-id", required=True, help="stable across restarts, unique per query")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stream, kafka = open_stream("ordo-exactly-once-sink", args, args.input)
    query = (
        stream.select("key", "value")
        .writeStream.foreachBatch(ExactlyOnceKafkaSink(args.output, kafka, args.sink_id))
        .option("checkpointLocation", args.checkpoint)
        .queryName("ordo-exactly-once-sink")
        .start()
    )
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
