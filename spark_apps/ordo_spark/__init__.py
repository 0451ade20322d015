"""ordo for Spark: the ordering-gated ``ordo-kafka`` streaming source and sinks for PySpark."""
