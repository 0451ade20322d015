"""ordo for Spark: the ordering-gated ``ordo-kafka`` streaming source and sinks for PySpark.

``register(spark)`` makes ``spark.readStream.format("ordo-kafka")`` available in a session.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the ``ordo-kafka`` data source with ``spark`` (a SparkSession)."""
    from .source import OrdoKafkaDataSource  # pyspark is only needed once a session exists

    spark.dataSource.register(OrdoKafkaDataSource)
