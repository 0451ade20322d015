"""What the jobs in ``spark_apps/jobs`` share: a session with the source registered, and Kafka
settings from the environment (the Secret ``ordo-spark-kafka`` mounted with ``envFrom``)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from typing import Any

from ordo.connection import InvalidConnectionError, librdkafka_config, mounted_secrets
from ordo.control_topics import DEFAULT_EPOCH_TOPIC

from . import register

__all__ = [
    "AUTHENTICATION_ENV",
    "BOOTSTRAP_ENV",
    "DEFAULT_SECRETS_DIR",
    "OPTIONS_ENV",
    "SECRETS_DIR_ENV",
    "TLS_ENV",
    "job_parser",
    "kafka_config_from_env",
    "open_stream",
    "session",
    "source_options",
]

# The variables read, the operator's own (its chart sets them for its default Kafka): nothing else
# in the environment is. A prefix scan of KAFKA_* took in what the kubelet injects for a Service
# named kafka (KAFKA_PORT, KAFKA_SERVICE_HOST, ...) as options librdkafka refuses.
BOOTSTRAP_ENV = "ORDO_KAFKA_BOOTSTRAP"
"""``bootstrap.servers``: ordo's one name for it."""
AUTHENTICATION_ENV = "ORDO_KAFKA_AUTHENTICATION"
"""Strimzi's ``authentication`` as JSON (``{"type": "scram-sha-512", "username": "spark",
"passwordSecret": {"secretName": "spark", "password": "password"}}``)."""
TLS_ENV = "ORDO_KAFKA_TLS"
"""Strimzi's ``tls`` as JSON (``{"trustedCertificates": [{"secretName": "my-cluster-cluster-ca-cert",
"certificate": "ca.crt"}]}``)."""
SECRETS_DIR_ENV = "ORDO_KAFKA_SECRETS_DIR"
"""Where the Secrets those name are mounted, one folder each (default ``DEFAULT_SECRETS_DIR``)."""
DEFAULT_SECRETS_DIR = "/etc/ordo/kafka-secrets"
OPTIONS_ENV = "ORDO_KAFKA_OPTIONS"
"""Raw librdkafka settings as a JSON object: the escape hatch (they may add to what the shape
decides, not contradict it)."""


def kafka_config_from_env(
    environ: Mapping[str, str] | None = None, bootstrap: str | None = None
) -> dict[str, str]:
    """Kafka client settings from the ``ORDO_KAFKA_*`` variables above (``bootstrap`` overrides
    ``ORDO_KAFKA_BOOTSTRAP``), built by ``ordo.connection`` as the operator builds its own.
    InvalidConnectionError names the variable, field or Secret key at fault."""
    source = os.environ if environ is None else environ
    options = {str(k): _option(v) for k, v in _json_object(source, OPTIONS_ENV).items()}
    return librdkafka_config(
        bootstrap or source.get(BOOTSTRAP_ENV, "").strip() or options.get("bootstrap.servers", ""),
        _json_object(source, AUTHENTICATION_ENV) or None,
        _json_object(source, TLS_ENV) or None,
        options,
        secrets=mounted_secrets(source.get(SECRETS_DIR_ENV) or DEFAULT_SECRETS_DIR),
        where="kafka",  # kafka.authentication.passwordSecret: the shape's fields, as the chart names them
    )


def _json_object(source: Mapping[str, str], name: str) -> dict[str, Any]:
    raw = source.get(name, "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as error:
        raise InvalidConnectionError(f"{name} is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise InvalidConnectionError(f"{name} must be a JSON object")
    return value


def _option(value: object) -> str:
    """A JSON value as librdkafka's string: booleans as ``true``/``false``."""
    if isinstance(value, dict | list):
        raise InvalidConnectionError(f"{OPTIONS_ENV} must map librdkafka option names to values")
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
    try:
        kafka = kafka_config_from_env(bootstrap=args.bootstrap)
    except InvalidConnectionError as error:  # the message names what to fix: say it alone
        raise SystemExit(
            f"{app_name}: {error} (from {BOOTSTRAP_ENV}, {AUTHENTICATION_ENV}, {TLS_ENV}, {OPTIONS_ENV}: "
            "the Secret ordo-spark-kafka, spark_apps/README.md)"
        ) from None
    more = dict(args.options)
    kafka.update({k.removeprefix("kafka."): v for k, v in more.items() if k.startswith("kafka.")})
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
