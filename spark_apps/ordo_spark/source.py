"""``spark.readStream.format("ordo-kafka")``: Kafka through ordo's ordering gate (docs/architecture.md).

A thin shell over ``planning``: the driver reads watermarks and epoch histories (``broker``), the
pure planner says where the batch ends, and each Kafka partition's range becomes one task that
reads it on an executor (``reading``).

Measured with pyspark 4.3: ``commit(end)`` arrives a batch late and never for the last batch,
so the gate's progress is the ``start`` Spark passes to ``latestOffset``; the reader is pickled
to executors, so driver clients are dropped from its state and executors make their own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ordo.epochs import EpochHistory

from .broker import BrokerView
from .options import SourceOptions, parse_options
from .planning import (
    Offsets,
    Plan,
    Slice,
    available_now_target,
    decode,
    encode,
    initial_offsets,
    plan_batch,
    slices,
)
from .reading import SCHEMA, read_slice

__all__ = ["OrdoKafkaDataSource", "OrdoKafkaStreamReader", "SlicePartition"]

_log = logging.getLogger(__name__)


class OrdoKafkaDataSource(DataSource):
    """Options: see ``ordo_spark.options`` (subscribe, kafka.bootstrap.servers, startingOffsets,
    maxRecordsPerTrigger, failOnDataLoss, epochTopic, gate, pollTimeoutMs, kafka.*)."""

    @classmethod
    def name(cls) -> str:
        return "ordo-kafka"

    def schema(self) -> StructType:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return OrdoKafkaStreamReader(parse_options(dict(self.options)), schema)


class SlicePartition(InputPartition):
    """One Spark task: one Kafka partition's whole range."""

    def __init__(self, piece: Slice) -> None:
        super().__init__(piece)
        self.piece = piece


class OrdoKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.last_plan: Plan | None = None
        self._target: Offsets | None = None
        self._broker: BrokerView | None = None
        self._histories: dict[str, EpochHistory | None] | None = None  # as of the last plan

    def __getstate__(self) -> dict[str, Any]:
        # Executors only read: driver clients (threads, sockets) must not travel with the reader.
        return {**self.__dict__, "_broker": None, "_histories": None, "last_plan": None}

    @property
    def broker(self) -> BrokerView:
        if self._broker is None:
            self._broker = BrokerView(self.options)
        return self._broker

    # -- driver ------------------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        marks, histories = self.broker.snapshot(self.options.topics)
        return encode(initial_offsets(self.options.starting, marks, histories))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_records)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        marks, histories = self.broker.snapshot(self.options.topics)
        self._histories = histories
        plan = plan_batch(
            decode(start),
            marks,
            histories,
            max_records=limit.max_rows if isinstance(limit, ReadMaxRows) else None,
            gate=self.options.gate,
            fail_on_data_loss=self.options.fail_on_data_loss,
            target=self._target,
        )
        for problem in plan.lost:
            _log.warning("ordo-kafka: %s; skipped (failOnDataLoss=false)", problem)
        for hold in plan.held:
            _log.debug("ordo-kafka: %s-%s held at %s: %s", hold.topic, hold.partition, hold.offset, hold.gate)
        self.last_plan = plan
        return encode(plan.end)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = available_now_target(*self.broker.snapshot(self.options.topics))

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        # The histories of the plan are as new as its end offsets; a batch replayed after a
        # restart was planned by another process, so it reads them afresh.
        histories: dict[str, EpochHistory | None] = {}
        if self.options.gate:
            histories = self._histories or self.broker.histories(self.options.topics)
        return [SlicePartition(piece) for piece in slices(decode(start), decode(end), histories)]

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint; the gate reads ``start`` instead."""

    def stop(self) -> None:
        if self._broker is not None:
            self._broker.close()
            self._broker = None

    # -- executors ---------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SlicePartition)
        yield from read_slice(
            self.options.consumer_config("reader"),
            partition.piece,
            to_arrow_schema(self.schema, timezone="UTC"),
            fail_on_data_loss=self.options.fail_on_data_loss,
            poll_timeout_ms=self.options.poll_timeout_ms,
        )
