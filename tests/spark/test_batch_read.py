"""spark.read.format("ordo-kafka") in local mode: a topic grown 3 -> 4 where a key moves from
partition 2 to partition 0, so partition order is not key order. The batch read gives exactly
what a Trigger.AvailableNow stream gives, with every key's records in order in collect(); the
gate off (the control) puts a key's new records before its old ones; a range that ends a prior
partition before its threshold fails instead of leaving records out; Spark's starting and ending
timestamps and includeHeaders hold."""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from typing import Any

import pytest
from confluent_kafka import Producer

from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLogWriter
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.waiting import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.testbed]

PER_EPOCH = 30


def _grown_topic(kafka: KafkaHandle, epochs: str) -> str:
    """Epoch 0 (3 partitions): key x in 0, key y in 2. Epoch 1 (4 partitions, thresholds at the
    ends): x moves to 3 and y to 0. Values are "key:sequence"."""
    topic = kafka.create_topic(3)
    producer = Producer(kafka.config())

    def write(key: str, partition: int, numbers: range) -> None:
        for n in numbers:
            producer.produce(topic, f"{key}:{n}".encode(), key=key.encode(), partition=partition)
        assert producer.flush(10) == 0

    write("x", 0, range(PER_EPOCH))
    write("y", 2, range(PER_EPOCH))
    kafka.grow(topic, 4)
    wait_for(lambda: len(producer.list_topics(topic, 10).topics[topic].partitions) == 4, 30, "4 partitions")
    history = EpochHistory.initial(topic, 3).begin_fence(4).publish({0: PER_EPOCH, 1: 0, 2: PER_EPOCH})
    writer = EpochLogWriter(kafka.config(), epochs)
    writer.write(history)
    writer.close()
    write("y", 0, range(PER_EPOCH, 2 * PER_EPOCH))
    write("x", 3, range(PER_EPOCH, 2 * PER_EPOCH))
    return topic


def _read(spark: Any, kafka: KafkaHandle, topic: str, epochs: str, **options: str) -> Any:
    return (
        spark.read.format("ordo-kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("epochTopic", epochs)
        .options(**options)
        .load()
    )


def _sequences(rows: list[Any]) -> dict[str, list[int]]:
    found: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        key, number = row["value"].decode().split(":")
        found[key].append(int(number))
    return dict(found)


def test_a_batch_read_is_the_stream_in_key_order(
    spark: Any, kafka: KafkaHandle, log_topics: tuple[str, str]
) -> None:
    epochs, _ = log_topics
    topic = _grown_topic(kafka, epochs)
    expected = list(range(2 * PER_EPOCH))

    rows = _read(spark, kafka, topic, epochs).collect()
    assert _sequences(rows) == {"x": expected, "y": expected}, "every key in order"
    assert {(r["partition"], r["offset"]): r["epoch"] for r in rows}[(0, PER_EPOCH)] == 1

    name = f"ordo_stream_{uuid.uuid4().hex[:8]}"
    stream = (
        spark.readStream.format("ordo-kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("epochTopic", epochs)
        .option("startingOffsets", "earliest")
        .load()
    )
    query = stream.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    assert query.awaitTermination(120)
    streamed = spark.table(name).select("topic", "partition", "offset", "epoch").collect()
    assert sorted(map(tuple, streamed)) == sorted(
        (r["topic"], r["partition"], r["offset"], r["epoch"]) for r in rows
    ), "exactly what the stream reads"

    control = _sequences(_read(spark, kafka, topic, epochs, gate="false").collect())
    assert control["y"] != expected, "partition order is not key order: the check can fail"
    assert sorted(control["y"]) == expected


def test_a_range_that_would_hold_records_behind_a_gate_fails(
    spark: Any, kafka: KafkaHandle, log_topics: tuple[str, str]
) -> None:
    epochs, _ = log_topics
    topic = _grown_topic(kafka, epochs)
    early = f'{{"{topic}": {{"2": {PER_EPOCH - 1}}}}}'  # y's old records end one short of the threshold
    with pytest.raises(Exception, match="cannot be read in order past offset 30") as failure:
        _read(spark, kafka, topic, epochs, endingOffsets=early).collect()
    assert "endingOffsets" in str(failure.value)
    ungated = _read(spark, kafka, topic, epochs, endingOffsets=early, gate="false")
    assert ungated.count() == 4 * PER_EPOCH - 1


def test_timestamps_and_headers(spark: Any, kafka: KafkaHandle) -> None:
    topic = kafka.create_topic(2)
    producer = Producer(kafka.config())
    base = int(time.time() * 1000) - 60_000  # brokers refuse timestamps far in the past
    errors: list[Any] = []
    for n in range(20):
        producer.produce(
            topic,
            str(n).encode(),
            partition=n % 2,
            timestamp=base + n * 100,
            headers=[("n", str(n).encode())],
            on_delivery=lambda error, _: errors.append(error) if error else None,
        )
    assert producer.flush(10) == 0 and not errors, errors

    def read(**options: str) -> Any:
        return _read(spark, kafka, topic, "__no_epochs", gate="false", **options)

    frame = read(startingTimestamp=str(base + 500), endingTimestamp=str(base + 1500))
    assert sorted(int(r["value"]) for r in frame.collect()) == list(range(5, 15))
    assert frame.first()["headers"] is not None
    bare = read(includeHeaders="false")
    assert "headers" not in bare.columns and bare.count() == 20
    future = str(base + 60_000)
    with pytest.raises(Exception, match="has no record with a timestamp at or after"):
        read(startingTimestamp=future).collect()
    assert read(startingTimestamp=future, startingOffsetsByTimestampStrategy="latest").count() == 0
