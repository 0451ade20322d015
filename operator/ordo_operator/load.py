"""A topic's load measured from Kafka itself, for a TopicAutoscaler (no Prometheus).

Each measurement reads every partition's end offset; the offsets added since the last one, over
the seconds between, are the topic's offset rate. Offsets are not records: each transaction ordo's
producers commit puts a marker (an offset, no record) into every partition it wrote, so at low
rates the offset rate overcounts records by up to half or more. So each measurement also reads a
tail sample of the offsets just added (at most ``SAMPLE_OFFSETS`` a measurement, spread over the
``SAMPLE_PARTITIONS`` partitions that grew most; read_uncommitted, which skips markers) and counts
the records in it: records per offset, and their mean key-and-value size for the bytes (the admin
client has no DescribeLogDirs). Target consumer groups' lag is the end offsets less their
committed offsets (a partition the group never committed counts no lag, as KEDA's Kafka scaler by
default).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from .kafka import KafkaSide
from .plans.autoscale import Load

__all__ = ["SAMPLE_OFFSETS", "SAMPLE_PARTITIONS", "LoadMeter", "Measurement", "TopicMissing"]

SAMPLE_OFFSETS = 2_000
"""Offsets read per measurement, at most: enough to count markers and sizes, cheap at any rate."""
SAMPLE_PARTITIONS = 64
"""Partitions sampled per measurement, at most (those that grew most)."""
_MIN_PER_PARTITION = 20


class TopicMissing(LookupError):
    """The topic does not exist."""


@dataclass(frozen=True)
class Measurement:
    load: Load
    partitions: int
    records_per_offset: float


class LoadMeter:
    """One topic's load, one ``measure`` call per interval; the first call only starts the clock."""

    def __init__(self, side: KafkaSide, topic: str, groups: Sequence[str]) -> None:
        self.side, self.topic, self.groups = side, topic, list(groups)
        self.consumer = Consumer(
            {
                **side.config,
                "group.id": "ordo-autoscaler-meter",  # assigned partitions only: it never joins nor commits
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_uncommitted",
                "auto.offset.reset": "latest",
            }
        )
        self.previous: tuple[float, dict[int, int]] | None = None
        self.records_per_offset = 1.0
        self.record_bytes = 0.0

    def measure(self) -> Measurement | None:
        """The load since the previous call, or None on the first. Raises TopicMissing, or
        KafkaException when Kafka does not answer (the next call measures from the last answer)."""
        partitions = self.side.partition_count(self.topic)
        if partitions is None:
            raise TopicMissing(f"topic {self.topic!r} does not exist")
        ends = self.side.end_offsets(self.topic, partitions)
        now = time.monotonic()
        previous, self.previous = self.previous, (now, ends)
        if previous is None:
            return None
        since, before = previous
        added = {p: end - before.get(p, 0) for p, end in ends.items() if end > before.get(p, 0)}
        if added:
            self._sample(ends, added)
        seconds = max(now - since, 1e-3)
        records = sum(added.values()) * self.records_per_offset
        lag = {group: self._lag(group, ends) for group in self.groups}
        load = Load(since, now, records / seconds, records * self.record_bytes / seconds, lag)
        return Measurement(load, partitions, self.records_per_offset)

    def _sample(self, ends: Mapping[int, int], added: Mapping[int, int]) -> None:
        """Records per offset and mean record size in the newest offsets of the partitions that grew."""
        sampled = sorted(added, key=lambda p: -added[p])[:SAMPLE_PARTITIONS]
        each = max(_MIN_PER_PARTITION, SAMPLE_OFFSETS // len(sampled))
        starts = {p: ends[p] - min(added[p], each) for p in sampled}
        self.consumer.assign([TopicPartition(self.topic, p, start) for p, start in starts.items()])
        pending, records, size = set(starts), 0, 0
        deadline = time.monotonic() + self.side.timeout
        while pending and time.monotonic() < deadline:
            for message in self.consumer.consume(500, timeout=0.5):
                p, offset, error = message.partition(), message.offset(), message.error()
                if p is None or offset is None or p not in pending:
                    continue
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF and offset >= ends[p]:
                        pending.discard(p)
                    elif error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    continue
                if offset < ends[p]:
                    records += 1
                    size += len(message.key() or b"") + len(message.value() or b"")
                if offset >= ends[p] - 1:
                    pending.discard(p)
        self.consumer.unassign()
        spanned = sum(ends[p] - starts[p] for p in starts if p not in pending)
        if spanned and not pending:  # a sample cut short by the deadline would undercount
            self.records_per_offset = min(1.0, records / spanned)
            if records:
                self.record_bytes = size / records

    def _lag(self, group: str, ends: Mapping[int, int]) -> float:
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(self.topic, p) for p in ends])
        future = self.side.admin.list_consumer_group_offsets([request], request_timeout=self.side.timeout)
        answer = future[group].result(self.side.timeout + 5)
        lag = 0
        for tp in answer.topic_partitions or []:
            if tp.error is not None:  # the coordinator still loading, ...: not a lag of 0
                raise KafkaException(tp.error)
            if tp.offset != OFFSET_INVALID and tp.offset >= 0:
                lag += max(0, ends.get(tp.partition, 0) - tp.offset)
        return float(lag)

    def close(self) -> None:
        self.consumer.close()
