"""``spark.read.format("ordo-kafka")``: a batch read of an offset range through the gate.

The range (startingOffsets/startingTimestamp.. to endingOffsets/endingTimestamp..) is planned as
the stream would read it (``ranges.plan_batch_read``): the DataFrame holds exactly the records
the stream would, and its partitions come in the stream's order, so ``collect()`` gives every
key's records in order. Planning runs once, in the process that calls ``partitions``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .broker import BrokerView
from .options import EndingOffsets, SourceOptions
from .ranges import ending_offsets, offsets_at_times, plan_batch_read, timestamp_requests
from .tasks import read_partition, starting_offsets, tasks_of

__all__ = ["OrdoKafkaBatchReader"]

_log = logging.getLogger(__name__)


class OrdoKafkaBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        broker = BrokerView(options)
        try:
            start = starting_offsets(options, broker)
            marks, histories = broker.snapshot(options.subscription)
            ending: EndingOffsets = options.ending
            if options.ending_times is not None:
                option = (
                    "endingTimestamp" if isinstance(options.ending_times, int) else "endingOffsetsByTimestamp"
                )
                requests = timestamp_requests(options.ending_times, marks, option)
                # as in Spark: a partition with no record at or after the time ends at its end
                ending = offsets_at_times(
                    requests, broker.offsets_for_times(requests), marks, when_none="latest", option=option
                )
            end = ending_offsets(ending, marks, histories)
        finally:
            broker.close()
        read = plan_batch_read(
            start, end, marks, histories, gate=options.gate, fail_on_data_loss=options.fail_on_data_loss
        )
        for problem in read.lost:
            _log.warning("ordo-kafka: %s; skipped (failOnDataLoss=false)", problem)
        return tasks_of(read.pieces, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(self.options, self.schema, partition)
