"""What the jobs in ``spark_apps/jobs`` share: a session with the source registered, and Kafka
settings from the environment (a Secret mounted with ``envFrom``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from . import register

__all__ = ["kafka_config_from_env", "session", "source_options"]


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
