"""What the stream and the batch reader both hand Spark: tasks of whole Kafka partition ranges
(``SlicePartition``, at most the option maxTasks a batch), how an executor reads one
(``read_partition``), and where a read starts (``starting_offsets``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from .broker import BrokerView
from .options import SourceOptions
from .planning import Offsets, Slice, initial_offsets, pack
from .ranges import offsets_at_times, timestamp_requests
from .reading import read_slices

__all__ = ["SlicePartition", "read_partition", "starting_offsets", "tasks_of"]


class SlicePartition(InputPartition):
    """One Spark task: whole ranges of one or more Kafka partitions, each read in order."""

    def __init__(self, pieces: tuple[Slice, ...]) -> None:
        super().__init__(pieces)
        self.pieces = pieces


def tasks_of(pieces: Sequence[Slice], options: SourceOptions) -> list[SlicePartition]:
    """A batch's slices as Spark tasks: one per slice up to maxTasks, then packed (``pack``)."""
    return [SlicePartition(task) for task in pack(pieces, options.max_tasks)]


def read_partition(
    options: SourceOptions, schema: StructType, partition: InputPartition
) -> Iterator[pa.RecordBatch]:
    """An executor's task, for streams and batch reads alike."""
    if not isinstance(partition, SlicePartition):  # Spark's stand-in when there are no slices
        assert partition.value is None, partition
        return
    yield from read_slices(
        options.consumer_config("reader"),
        partition.pieces,
        to_arrow_schema(schema, timezone="UTC"),
        fail_on_data_loss=options.fail_on_data_loss,
        poll_timeout_ms=options.poll_timeout_ms,
        misplaced=options.misplaced_records,
    )


def starting_offsets(options: SourceOptions, broker: BrokerView) -> Offsets:
    """Where a read starts: startingTimestamp, startingOffsetsByTimestamp or startingOffsets (in
    that order of precedence, as in Spark)."""
    marks, histories = broker.snapshot(options.subscription)
    starting = options.starting
    if options.starting_times is not None:
        option = (
            "startingTimestamp" if isinstance(options.starting_times, int) else "startingOffsetsByTimestamp"
        )
        requests = timestamp_requests(options.starting_times, marks, option)
        found = broker.offsets_for_times(requests)
        starting = offsets_at_times(
            requests, found, marks, when_none=options.starting_times_strategy, option=option
        )
    return initial_offsets(starting, marks, histories)
