"""What the jobs in ``spark_apps/jobs`` share: a session with the source registered, and Kafka
settings from the environment (a Secret mounted with ``envFrom``)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from ordo.protocol import DEFAULT_EPOCH_TOPIC

from . import register

__all__ = ["job_parser", "kafka_config_from_env", "open_stream", "session", "source_options"]


def kafka_config_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``KAFKA_*`` variables as client settings: ``KAFKA_BOOTSTRAP_SERVERS`` → ``bootstrap.servers``,
    ``KAFKA_SASL_USERNAME`` → ``sasl.username``, ``KAFKA_SECURITY_PROTOCOL`` → ``security.protocol``."""
    source = os.environ if environ is None else environ
    return {
        name[len("KAFKA_") :].lower().replace("_", "."): value
        for name, value in source.items()
        if name.startswith("KAFKA_") and value
    }


def source_options(kafka: Mapping[str, str], **options: str) -> dict[str, str]:
    """``ordo-kafka`` options: the client settings as ``kafka.*`` plus the source's own."""
    return {**{f"kafka.{k}": v for k, v in kafka.items()}, **options}


def session(app_name: str) -> Any:
    """The job's SparkSession (master and resources come from spark-submit / the operator)."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(app_name).getOrCreate()
    register(spark)
    return spark


def job_parser(prog: str) -> argparse.ArgumentParser:
    """The arguments every job takes; a job adds its own."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--checkpoint", required=True, help="the streaming query's checkpoint location")
    parser.add_argument("--bootstrap", help="overrides KAFKA_BOOTSTRAP_SERVERS")
    parser.add_argument("--epoch-topic", default=DEFAULT_EPOCH_TOPIC)
    parser.add_argument(
        "--max-offsets-per-trigger",
        "--max-records-per-trigger",  # its name before the source took Spark's option names
        dest="max_offsets_per_trigger",
        type=int,
        default=100_000,
        help="the source option maxOffsetsPerTrigger (default 100000)",
    )
    parser.add_argument("--starting-offsets", default="earliest")
    return parser


def open_stream(
    app_name: str, args: argparse.Namespace, topic: str, **options: str
) -> tuple[Any, dict[str, str]]:
    """A session and an ``ordo-kafka`` stream of ``topic`` from the common arguments; returns the
    stream and the Kafka client settings it used."""
    kafka = kafka_config_from_env()
    if args.bootstrap:
        kafka["bootstrap.servers"] = args.bootstrap
    settings = source_options(
        kafka,
        subscribe=topic,
        startingOffsets=args.starting_offsets,
        maxOffsetsPerTrigger=str(args.max_offsets_per_trigger),
        epochTopic=args.epoch_topic,
        **options,
    )
    return session(app_name).readStream.format("ordo-kafka").options(**settings).load(), kafka
