"""Executor-side reading without Spark: a slice becomes Arrow batches of exactly the schema Spark
checks, with headers and epochs; ranges that end in transaction markers or aborted records end."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql.pandas.types import to_arrow_schema

from ordo_spark.options import parse_options
from ordo_spark.planning import DataLossError, Slice
from ordo_spark.reading import SCHEMA, close_consumers, read_slice, read_slices
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed

ARROW = to_arrow_schema(SCHEMA, timezone="UTC")


@pytest.fixture(autouse=True)
def _close_cached_consumers() -> Iterator[None]:
    yield
    close_consumers()


def _read(kafka: KafkaHandle, piece: Slice, **options: str) -> pa.Table:
    parsed = parse_options({"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": piece.topic, **options})
    batches = list(
        read_slice(
            parsed.consumer_config("test"),
            piece,
            ARROW,
            fail_on_data_loss=parsed.fail_on_data_loss,
            poll_timeout_ms=20_000,
        )
    )
    assert all(batch.schema.equals(ARROW) for batch in batches)  # what Spark checks
    return pa.Table.from_batches(batches, ARROW)


def test_a_slice_reads_its_range_with_headers_and_epochs(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(1)
    producer = Producer(kafka.config())
    for n in range(100):
        headers: Any = [("n", str(n).encode())] if n % 2 else None
        producer.produce(topic, f"v{n}".encode(), key=b"k", partition=0, headers=headers)
    assert producer.flush(10) == 0
    table = _read(kafka, Slice(topic, 0, 10, 60, ((0, 0), (40, 1))))
    rows = table.to_pylist()
    assert [r["offset"] for r in rows] == list(range(10, 60))
    assert rows[0]["value"] == b"v10" and rows[0]["headers"] is None
    assert rows[1]["headers"] == [{"key": "n", "value": b"11"}]
    assert {r["offset"]: r["epoch"] for r in rows if r["offset"] in (39, 40)} == {39: 0, 40: 1}
    assert rows[0]["timestamp"] is not None and rows[0]["topic"] == topic and rows[0]["partition"] == 0


def test_a_range_ending_in_transaction_markers_and_aborted_records_ends(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(1)
    producer = Producer(kafka.config(transactional_id=f"{topic}-writer"))
    producer.init_transactions(10)
    for commit in (True, False):
        producer.begin_transaction()
        for n in range(10):
            producer.produce(topic, f"{commit}-{n}".encode(), partition=0)
        assert producer.flush(10) == 0  # written before the abort: it would drop what is still queued
        (producer.commit_transaction if commit else producer.abort_transaction)(10)
    # 10 committed records and a marker, then 10 aborted records and a marker: the last offset
    # before the end is never a record. The coordinator writes each marker after the call that
    # ended its transaction returned: read once both are in and the last stable offset is the end.
    end = 22
    probe = Consumer(kafka.config(group_id="probe", isolation_level="read_committed"))
    try:
        wait_for(
            lambda: probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1] == end,
            30,
            "both transactions' markers",
        )
    finally:
        probe.close()
    committed = _read(kafka, Slice(topic, 0, 0, end), **{"kafka.isolation.level": "read_committed"})
    assert committed.num_rows == 10
    # read_uncommitted only without the gate (gated, it is refused: test_spark_options)
    everything = _read(
        kafka, Slice(topic, 0, 0, end), gate="false", **{"kafka.isolation.level": "read_uncommitted"}
    )
    assert everything.num_rows == 20


def test_a_range_that_is_gone_fails_clearly_or_is_skipped(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(1)
    producer = Producer(kafka.config())
    for n in range(5):
        producer.produce(topic, str(n).encode(), partition=0)
    assert producer.flush(10) == 0
    # a range past the end of a (recreated) partition: Kafka says the offsets are out of range
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        _read(kafka, Slice(topic, 0, 50, 60))
    assert _read(kafka, Slice(topic, 0, 50, 60), failOnDataLoss="false").num_rows == 0


def test_a_task_reads_its_slices_side_by_side_each_whole_and_in_order(kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(4)
    producer = Producer(kafka.config())
    for n in range(400):
        producer.produce(topic, f"{n % 4}-{n // 4}".encode(), partition=n % 4)
    assert producer.flush(10) == 0
    # three ranges of 100 records, and one past the end of partition 3, skipped without the rest
    pieces = [
        Slice(topic, 0, 0, 100),
        Slice(topic, 1, 20, 70),
        Slice(topic, 2, 99, 100),
        Slice(topic, 3, 150, 160),
    ]
    parsed = parse_options(
        {"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": topic, "failOnDataLoss": "false"}
    )
    batches = list(
        read_slices(
            parsed.consumer_config("test"), pieces, ARROW, fail_on_data_loss=False, poll_timeout_ms=20_000
        )
    )
    assert all(len(set(b.column("partition").to_pylist())) == 1 for b in batches)  # one slice a batch
    rows = pa.Table.from_batches(batches, ARROW).to_pylist()
    by_partition: dict[int, list[int]] = {}
    for row in rows:
        by_partition.setdefault(row["partition"], []).append(row["offset"])
    assert by_partition == {0: list(range(100)), 1: list(range(20, 70)), 2: [99]}
    assert {r["value"] for r in rows if r["partition"] == 2} == {b"2-99"}
