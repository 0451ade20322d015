"""One local SparkSession for every Spark test (starting one costs ~8 s), with ordo-kafka
registered. Workers run this interpreter, where ordo_spark is installed (editable)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ordo_testbed.kafka.broker import KafkaTestbed


@pytest.fixture(scope="session")
def spark(kafka_testbed: KafkaTestbed | None) -> Iterator[Any]:
    """Depends on the Kafka testbed only so that Spark (whose Python workers keep Kafka clients)
    stops before the testbed does."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a Java runtime (17+)")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import ordo_spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("ordo-spark-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.minBatchesToRetain", "5")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    ordo_spark.register(session)
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()
