"""Gated readers never deliver a misplaced record as if in order (issue 42 item 2): records a
plain producer placed by the old partition count after an expansion's thresholds
(``ordo_testbed.gate_topics.grown_with_misplaced_records``), read through each policy of the
GatedConsumer and the AsyncConsumer(gate=True). Without the rule every record is delivered and
each test fails. The Spark source: tests/spark/test_misplaced_spark.py."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from prometheus_client import REGISTRY

from ordo import AsyncConsumer, GatedConsumer, MisplacedRecordError
from ordo_testbed.gate_topics import Misplaced, grown_with_misplaced_records, offsets_in_order
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed


@pytest.fixture
def grown(kafka: KafkaHandle) -> Misplaced:
    return grown_with_misplaced_records(kafka)


def _counted(topic: str) -> float:
    return REGISTRY.get_sample_value("ordo_gate_misplaced_records_total", {"topic": topic}) or 0.0


def _at(messages: list[Message]) -> set[tuple[int, int]]:
    return {(m.partition(), m.offset()) for m in messages}  # type: ignore[misc]


def _gated(kafka: KafkaHandle, grown: Misplaced, group: str = "", **options: Any) -> GatedConsumer:
    config = kafka.config(group_id=group or kafka.topic("g"), enable_auto_commit=False)
    every = [TopicPartition(grown.topic, p, 0) for p in range(4)]
    return GatedConsumer(config, [grown.topic], epoch_topic=grown.epochs, assignment=every, **options)


def _committed(kafka: KafkaHandle, group: str, topic: str) -> dict[int, int]:
    reader = Consumer(kafka.config(group_id=group))
    try:
        found = reader.committed([TopicPartition(topic, p) for p in range(4)], timeout=10)
    finally:
        reader.close()
    return {tp.partition: tp.offset for tp in found}


def test_a_gated_consumer_raises_misplaced_records_after_what_came_before_them(
    kafka: KafkaHandle, grown: Misplaced, caplog: pytest.LogCaptureFixture
) -> None:
    assert len(grown.misplaced) >= 5
    counted = _counted(grown.topic)
    delivered: list[Message] = []
    raised: list[Message] = []
    arrived: list[Message] = []  # both, in the order the application met them
    errors = 0
    group = kafka.topic("g")
    consumer = _gated(kafka, grown, group)
    with consumer, caplog.at_level(logging.WARNING, logger="ordo.epochs.consumer_gate"):

        def all_met() -> bool:
            nonlocal errors
            try:
                batch = [m for m in consumer.consume(100, 0.2) if m.error() is None]
                delivered.extend(batch)
                arrived.extend(batch)
            except MisplacedRecordError as error:
                errors += 1
                raised.extend(error.records)
                arrived.extend(error.records)
                assert "belongs in partition" in str(error) and "on_misplaced" in str(error)
            return len(arrived) >= len(grown.records)

        wait_for(all_met, 30, "every record delivered or raised")
        consumer.consume(1, 0)  # the application goes on: what was raised counts as processed now
        consumer.commit()
    assert _committed(kafka, group, grown.topic) == grown.ends
    assert _at(raised) == grown.misplaced, "each misplaced record raised, none delivered"
    assert _at(delivered) == grown.records - grown.misplaced
    assert len(arrived) == len(grown.records), "nothing twice"
    for partition, offsets in offsets_in_order(arrived).items():
        assert offsets == sorted(offsets), f"partition {partition}: raised in its place, between its records"
    assert errors == len(grown.misplaced), "one error per stale record: none follows another directly"
    assert _counted(grown.topic) - counted == len(grown.misplaced)
    warned = [r.getMessage() for r in caplog.records if "belongs in partition" in r.getMessage()]
    assert len(warned) == len(grown.misplaced) and "MisplacedRecordError" in warned[0]


def test_a_callback_gets_the_misplaced_records_instead_of_the_application(
    kafka: KafkaHandle, grown: Misplaced
) -> None:
    """Read beside a topic ordo never expanded (a consumer of two topics scans each with its own
    ranges): its keyed records, wherever they are, are never misplaced."""
    plain = kafka.create_topic(1)
    producer = Producer(kafka.config())
    for i in range(5):
        producer.produce(plain, b"v", key=f"stale-{i}".encode(), partition=0)
    assert producer.flush(10) == 0
    handed: list[Message] = []
    delivered: list[Message] = []
    config = kafka.config(group_id=kafka.topic("g"), enable_auto_commit=False)
    every = [TopicPartition(grown.topic, p, 0) for p in range(4)] + [TopicPartition(plain, 0, 0)]
    consumer = GatedConsumer(
        config, [grown.topic, plain], epoch_topic=grown.epochs, assignment=every, on_misplaced=handed.extend
    )  # the callable could as well produce each to a dead-letter topic (docs/async_consumer.md)
    try:

        def all_met() -> bool:
            delivered.extend(m for m in consumer.consume(100, 0.2) if m.error() is None)
            return len(delivered) + len(handed) >= len(grown.records) + 5

        wait_for(all_met, 30, "every record delivered or handed over")
    finally:
        consumer.close()
    assert _at(handed) == grown.misplaced
    assert _at([m for m in delivered if m.topic() == grown.topic]) == grown.records - grown.misplaced
    assert sum(1 for m in delivered if m.topic() == plain) == 5


def test_deliver_hands_them_out_and_still_counts_them(kafka: KafkaHandle, grown: Misplaced) -> None:
    counted = _counted(grown.topic)
    delivered: list[Message] = []
    consumer = _gated(kafka, grown, on_misplaced="deliver")
    try:

        def all_met() -> bool:
            delivered.extend(m for m in consumer.consume(100, 0.2) if m.error() is None)
            return len(delivered) >= len(grown.records)

        wait_for(all_met, 30, "every record delivered")
    finally:
        consumer.close()
    assert _at(delivered) == grown.records
    assert _counted(grown.topic) - counted == len(grown.misplaced), "said and counted, though delivered"


def test_an_async_consumer_raises_them_and_commits_past_them_once_the_application_goes_on(
    kafka: KafkaHandle, grown: Misplaced, closing: list[AsyncConsumer]
) -> None:
    group = kafka.topic("g")
    config = kafka.config(group_id=group, auto_offset_reset="earliest")
    consumer = AsyncConsumer(config, [grown.topic], gate=True, epoch_topic=grown.epochs, ordering="partition")
    closing.append(consumer)
    delivered: list[Message] = []
    raised: list[Message] = []
    arrived: list[Message] = []

    def all_met() -> bool:
        try:
            batch = consumer.poll(0.2)
        except MisplacedRecordError as error:
            raised.extend(error.records)
            arrived.extend(error.records)
            assert "next poll()" in str(error)
            return False
        delivered.extend(batch.records)
        arrived.extend(batch.records)
        consumer.done_many(batch.records)
        return len(arrived) >= len(grown.records)

    wait_for(all_met, 60, "every record handed out or raised")
    assert _at(raised) == grown.misplaced and _at(delivered) == grown.records - grown.misplaced
    for partition, offsets in offsets_in_order(arrived).items():
        assert offsets == sorted(offsets), f"partition {partition}: in offset order (ordering='partition')"
    consumer.poll(0)  # the application goes on: the last raised count as done
    consumer.close()  # commits what is done, synchronously
    assert _committed(kafka, group, grown.topic) == grown.ends


def test_an_async_consumer_hands_them_to_its_callback(
    kafka: KafkaHandle, grown: Misplaced, closing: list[AsyncConsumer]
) -> None:
    handed: list[Message] = []
    config = kafka.config(group_id=kafka.topic("g"), auto_offset_reset="earliest")
    consumer = AsyncConsumer(
        config, [grown.topic], gate=True, epoch_topic=grown.epochs, on_misplaced=handed.extend
    )
    closing.append(consumer)
    delivered: list[Message] = []

    def all_met() -> bool:
        batch = consumer.poll(0.2)
        delivered.extend(batch.records)
        consumer.done_many(batch.records)
        return len(delivered) + len(handed) >= len(grown.records)

    wait_for(all_met, 60, "every record handed out or handed over")
    assert _at(handed) == grown.misplaced and _at(delivered) == grown.records - grown.misplaced


def test_an_async_consumer_that_stops_at_the_error_reads_them_again(
    kafka: KafkaHandle, grown: Misplaced, closing: list[AsyncConsumer]
) -> None:
    """Raised records count done only once the application goes on: closed at the error, the
    consumer commits short of them (and does not wait for them as work in flight)."""
    group = kafka.topic("g")
    config = kafka.config(group_id=group, auto_offset_reset="earliest")
    consumer = AsyncConsumer(config, [grown.topic], gate=True, epoch_topic=grown.epochs)
    closing.append(consumer)
    raised: list[Message] = []

    def raises() -> bool:
        try:
            consumer.done_many(consumer.poll(0.2).records)
        except MisplacedRecordError as error:
            raised.extend(error.records)
        return bool(raised)

    wait_for(raises, 60, "a misplaced record raised")
    started = time.monotonic()
    consumer.close(timeout=20)
    assert time.monotonic() - started < 10, "the raised records are not waited for"
    committed = _committed(kafka, group, grown.topic)
    for partition, offset in _at(raised):
        assert 0 <= committed[partition] <= offset, (
            f"committed past {partition}@{offset} though never gone on"
        )
