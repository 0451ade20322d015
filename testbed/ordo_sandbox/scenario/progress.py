"""Where each partition of a topic stands for a consumer group: what a drain that stops short
needs to be understood (the sandbox and the scenario workloads print it)."""

from __future__ import annotations

import time
from typing import Any

from ordo.client_config import drain, logged
from ordo_sandbox.kafka_settings import Kafka, settings_of

__all__ = ["find_records", "partition_progress", "partitions_of"]


def partition_progress(kafka: Kafka, topic: str, group: str) -> str:
    """Per partition of ``topic``: its end, its last stable offset and ``group``'s committed offset
    (a drain that stops short shows whether a transaction holds readers back or a consumer stalled)."""
    from confluent_kafka import Consumer

    def client(isolation: str) -> Any:
        return Consumer(logged({**settings_of(kafka), "group.id": group, "isolation.level": isolation}))

    uncommitted, committed = client("read_uncommitted"), client("read_committed")
    try:
        partitions = partitions_of(uncommitted, topic)
        group_at = {
            t.partition: t.offset for t in committed.committed(partitions, timeout=5) if t.offset >= 0
        }
        rows = []
        for tp in partitions:
            end = uncommitted.get_watermark_offsets(tp, timeout=5, cached=False)[1]
            stable = committed.get_watermark_offsets(tp, timeout=5, cached=False)[1]
            rows.append(
                f"p{tp.partition} end {end} stable {stable} group {group_at.get(tp.partition, 'none')}"
            )
        return "; ".join(rows)
    finally:
        for reader in (uncommitted, committed):
            drain(reader)  # their log lines: they have no assignment and are never polled
            reader.close()


def partitions_of(client: Any, topic: str) -> list[Any]:
    """The ``TopicPartition``s of ``topic`` as the broker lists them now (none if it does not exist)."""
    from confluent_kafka import TopicPartition

    metadata = client.list_topics(topic, timeout=5).topics.get(topic)
    return [TopicPartition(topic, p) for p in sorted(metadata.partitions if metadata is not None else ())]


def find_records(
    kafka: Kafka, topic: str, wanted: set[tuple[str, int]], timeout: float = 30.0
) -> dict[tuple[str, int], str]:
    """Where each of ``wanted`` (key, seq) sits in ``topic`` ("p3@812"), read from the beginning
    to the end of every partition as the broker has them now, independently of any consumer; for
    one not found, that Kafka does not have it, or that the read stopped short of the end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError

    from ordo_sandbox.scenario.records import decode

    reader = Consumer(
        logged({**settings_of(kafka), "group.id": "ordo-find", "enable.partition.eof": True,
                "enable.auto.commit": False})
    )  # fmt: skip
    found: dict[tuple[str, int], str] = {}
    ended: set[int] = set()
    partitions: list[Any] = []
    try:
        partitions = partitions_of(reader, topic)
        for tp in partitions:
            tp.offset = OFFSET_BEGINNING
        reader.assign(partitions)
        deadline = time.monotonic() + timeout
        while len(ended) < len(partitions) and time.monotonic() < deadline:
            for message in reader.consume(10_000, 0.5):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        ended.add(message.partition() or 0)
                    continue
                record = decode(message.value() or b"{}")
                if (record.key, record.seq) in wanted:
                    found[(record.key, record.seq)] = f"p{message.partition()}@{message.offset()}"
    finally:
        drain(reader)
        reader.close()
    absent = (
        "no offset: Kafka does not have it"
        if len(ended) == len(partitions)
        else f"not found in what {timeout:g}s of reading reached (not every partition's end)"
    )
    return {record: found.get(record, absent) for record in wanted}
