"""What the jobs in ``spark_apps/jobs`` share: a session with the source registered, and Kafka
settings from the environment (the Secret ``ordo-spark-kafka`` mounted with ``envFrom``)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from typing import Any

from ordo.protocol import DEFAULT_EPOCH_TOPIC

from . import register

__all__ = [
    "BOOTSTRAP_ENV",
    "OPTIONS_ENV",
    "job_parser",
    "kafka_config_from_env",
    "open_stream",
    "session",
    "source_options",
]

BOOTSTRAP_ENV = "ORDO_KAFKA_BOOTSTRAP"
"""Kafka's bootstrap servers (``bootstrap.servers``): ordo's one name for it, the operator's too."""
OPTIONS_ENV = "ORDO_KAFKA_OPTIONS"
"""More librdkafka settings as a JSON object (``security.protocol``, ``sasl.*``, ``ssl.ca.location``)."""


def kafka_config_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Kafka client settings from exactly two variables, ``ORDO_KAFKA_BOOTSTRAP`` and
    ``ORDO_KAFKA_OPTIONS``; nothing else in the environment is read. (A prefix scan of ``KAFKA_*``
    took in what the kubelet injects for a Service named ``kafka``: ``KAFKA_PORT``,
    ``KAFKA_SERVICE_HOST``, ... became options librdkafka refuses.) ValueError names the variable
    when its value is not what it must be."""
    source = os.environ if environ is None else environ
    config: dict[str, str] = {}
    raw = source.get(OPTIONS_ENV, "").strip()
    if raw:
        try:
            options = json.loads(raw)
        except ValueError as error:
            raise ValueError(f"{OPTIONS_ENV} is not JSON: {error}") from None
        if not isinstance(options, dict) or any(isinstance(v, dict | list) for v in options.values()):
            raise ValueError(f"{OPTIONS_ENV} must be a JSON object of librdkafka options (name: value)")
        config.update({str(k): _option(v) for k, v in options.items()})
    bootstrap = source.get(BOOTSTRAP_ENV, "").strip()
    if bootstrap:
        given = config.get("bootstrap.servers")
        if given is not None and given != bootstrap:
            raise ValueError(f"{BOOTSTRAP_ENV} ({bootstrap}) and bootstrap.servers in {OPTIONS_ENV} differ")
        config["bootstrap.servers"] = bootstrap
    return config


def _option(value: object) -> str:
    """A JSON value as librdkafka's string: booleans as ``true``/``false``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


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
    parser.add_argument("--bootstrap", help=f"overrides {BOOTSTRAP_ENV}")
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
    parser.add_argument(
        "--option",
        dest="options",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=_name_value,
        help="another ordo-kafka source option (maxTasks=8, failOnDataLoss=false); kafka.* ones are "
        "client settings, also for the sink's producer (kafka.security.protocol=SSL); repeatable",
    )
    return parser


def _name_value(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME=VALUE")
    return name.strip(), value


def open_stream(
    app_name: str, args: argparse.Namespace, topic: str, **options: str
) -> tuple[Any, dict[str, str]]:
    """A session and an ``ordo-kafka`` stream of ``topic`` from the common arguments; returns the
    stream and the Kafka client settings it used."""
    kafka = kafka_config_from_env()
    more = dict(args.options)
    kafka.update({k.removeprefix("kafka."): v for k, v in more.items() if k.startswith("kafka.")})
    if args.bootstrap:
        kafka["bootstrap.servers"] = args.bootstrap
    if "bootstrap.servers" not in kafka:
        raise SystemExit(
            f"{app_name}: no Kafka to read: set {BOOTSTRAP_ENV} (the Secret ordo-spark-kafka, see "
            "spark_apps/README.md) or give --bootstrap"
        )
    settings = source_options(
        kafka,
        subscribe=topic,
        startingOffsets=args.starting_offsets,
        maxOffsetsPerTrigger=str(args.max_offsets_per_trigger),
        epochTopic=args.epoch_topic,
        **options,
        **{k: v for k, v in more.items() if not k.startswith("kafka.")},
    )
    return session(app_name).readStream.format("ordo-kafka").options(**settings).load(), kafka
