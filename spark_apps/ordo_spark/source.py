"""``spark.readStream.format("ordo-kafka")`` and ``spark.read.format("ordo-kafka")``: Kafka
through ordo's ordering gate (docs/architecture.md).

A thin shell over ``planning``: the driver reads watermarks and epoch histories (``broker``), the
pure planner says where the batch ends, and each Kafka partition's range becomes one task that
reads it on an executor (``tasks``, ``reading``). Batch reads are in ``batch``.

Measured with pyspark 4.3: ``commit(end)`` arrives a batch late and never for the last batch,
so the gate's progress is the ``start`` Spark passes to ``latestOffset``; the reader is pickled
to executors, so driver clients are dropped from its state and executors make their own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ordo.epochs import EpochHistory, GateKeeper

from .broker import BrokerView
from .options import SourceOptions, include_headers, parse_options
from .planning import (
    Offsets,
    Plan,
    available_now_target,
    decode,
    encode,
    plan_batch,
    slices,
    worth_a_batch,
)
from .reading import schema_for
from .tasks import read_partition, starting_offsets, tasks_of

__all__ = ["OrdoKafkaDataSource", "OrdoKafkaStreamReader"]

_log = logging.getLogger(__name__)


class OrdoKafkaDataSource(DataSource):
    """Options: Spark's Kafka source's, see ``ordo_spark.options`` and spark_apps/README.md."""

    @classmethod
    def name(cls) -> str:
        return "ordo-kafka"

    def schema(self) -> StructType:
        return schema_for(include_headers(dict(self.options)))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return OrdoKafkaStreamReader(parse_options(dict(self.options), "stream"), schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        from .batch import OrdoKafkaBatchReader

        return OrdoKafkaBatchReader(parse_options(dict(self.options), "batch"), schema)


class OrdoKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.last_plan: Plan | None = None
        self._target: Offsets | None = None
        self._broker: BrokerView | None = None
        self._histories: dict[str, EpochHistory | None] | None = None  # as of the last plan
        self._keepers: dict[str, GateKeeper] = {}  # the gates' work, kept while a history stays
        self._last_batch: float | None = None  # monotonic time the last batch was planned

    def __getstate__(self) -> dict[str, Any]:
        # Executors only read: driver clients (threads, sockets) must not travel with the reader.
        return {**self.__dict__, "_broker": None, "_histories": None, "last_plan": None, "_keepers": {}}

    @property
    def broker(self) -> BrokerView:
        if self._broker is None:
            self._broker = BrokerView(self.options)
        return self._broker

    # -- driver ------------------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        return encode(starting_offsets(self.options, self.broker))

    def getDefaultReadLimit(self) -> ReadLimit:
        # Python sources get one limit; minOffsetsPerTrigger with a maximum is applied below.
        if self.options.max_records is not None:
            return ReadMaxRows(self.options.max_records)
        if self.options.min_records is not None:
            return ReadMinRows(self.options.min_records)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        marks, histories = self.broker.snapshot(self.options.subscription)
        self._histories = histories
        begin = decode(start)
        plan = plan_batch(
            begin,
            marks,
            histories,
            max_records=limit.max_rows if isinstance(limit, ReadMaxRows) else None,
            gate=self.options.gate,
            fail_on_data_loss=self.options.fail_on_data_loss,
            target=self._target,
            keepers=self._keepers,
        )
        for problem in plan.lost:
            _log.warning("ordo-kafka: %s; skipped (failOnDataLoss=false)", problem)
        for hold in plan.held:
            _log.debug("ordo-kafka: %s-%s held at %s: %s", hold.topic, hold.partition, hold.offset, hold.gate)
        self.last_plan = plan
        # minOffsetsPerTrigger waits for more (never with Trigger.AvailableNow, which must end)
        wait_for_more = not isinstance(limit, ReadAllAvailable) and self._target is None
        now = time.monotonic()
        since_last = None if self._last_batch is None else (now - self._last_batch) * 1000
        min_records = self.options.min_records if wait_for_more else None
        if not worth_a_batch(begin, plan.end, min_records, since_last, self.options.max_trigger_delay_ms):
            return start
        if plan.end != begin:
            self._last_batch = now
        return encode(plan.end)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = available_now_target(*self.broker.snapshot(self.options.subscription))

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        # The histories of the plan are as new as its end offsets; a batch replayed after a
        # restart was planned by another process, so it reads them afresh.
        histories: dict[str, EpochHistory | None] = {}
        if self.options.gate:
            histories = self._histories or self.broker.histories(end)
        return tasks_of(slices(decode(start), decode(end), histories), self.options)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint; the gate reads ``start`` instead."""

    def stop(self) -> None:
        if self._broker is not None:
            self._broker.close()
            self._broker = None

    # -- executors ---------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(self.options, self.schema, partition)
