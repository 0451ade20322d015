"""What is in a Kafka topic, checked independently (``ordo verify``, the sandbox's report).

It reads the topic with read_committed to the end of every partition, and the topic's history from
the epoch log as plain JSON, and checks each key's records: none twice, none missing, and in order
across expansions. It shares no code with the SDK's producers and consumers (only how a Kafka
client is configured, ``ordo._clients``). Where a record's key and per-key number are is the
caller's to say (:mod:`ordo.verify.records`: JSON fields, or the Kafka key with a header).

Order: a key lives in one partition per epoch, so its records in storage order are those of each
epoch (an epoch's records in an old partition start at that epoch's threshold) one epoch after
another. Numbers must increase along that order. A key found in two partitions within one epoch
has records placed by another partition count (a producer that wrote by the old count after the
thresholds): no consumer can know their order, so each record outside the partition holding most
of the key's records of that epoch is counted out of order (``misplaced``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._clients import BrokerErrors, cluster_metadata, drain, logged
from ..control_topics import DEFAULT_EPOCH_TOPIC
from .order import KeyOrder
from .records import RawRecord, RecordLayout

__all__ = [
    "ActiveEpoch",
    "ReadProgress",
    "StoredRecord",
    "TopicRecords",
    "TopicVerdict",
    "check_topic",
    "epoch_of",
    "parse_epochs",
    "read_epoch_log",
    "read_epochs",
    "read_topic",
]


@dataclass(frozen=True)
class StoredRecord:
    partition: int
    offset: int
    key: str
    seq: int


@dataclass(frozen=True)
class ActiveEpoch:
    epoch: int
    partitions: int
    from_partitions: int | None = None
    thresholds: Mapping[int, int] = field(default_factory=dict)


@dataclass
class TopicRecords:
    """What ``read_topic`` read: the records the layout read, how many it could not, and the first
    of those (to say what they look like)."""

    records: list[StoredRecord]
    unreadable: int = 0
    samples: list[RawRecord] = field(default_factory=list)


@dataclass
class TopicVerdict:
    topic: str
    records: int = 0
    keys: int = 0
    partitions: int = 0
    epochs: int = 1
    duplicates: int = 0
    missing: int = 0
    order_violations: int = 0
    misplaced: int = 0  # counted in order_violations too
    unreadable: int = 0
    expected: int | None = None  # records the source holds, when it is known
    numbered: bool = True  # False: no per-key numbers, only each key's partition per epoch was checked
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.missing or self.order_violations or self.unreadable)

    def summary(self) -> str:
        head = f"{self.topic}: {self.records} records of {self.keys} keys in {self.partitions} partitions, "
        if not self.numbered:
            return (
                f"{head}{self.epochs} epoch(s), no per-key numbers (duplicates and loss not checked): "
                f"keys out of their epoch's partition {self.misplaced}, unreadable {self.unreadable}"
            )
        return (
            f"{head}{self.epochs} epoch(s): duplicates {self.duplicates}, missing {self.missing}, "
            f"order violations {self.order_violations} (misplaced {self.misplaced}), "
            f"unreadable {self.unreadable}"
        )


def parse_epochs(history: Mapping[str, Any]) -> list[ActiveEpoch]:
    """The active epochs of an epoch-log value (fencing and aborted ones change nothing in storage)."""
    return [
        ActiveEpoch(
            int(e["epoch"]),
            int(e["partitions"]),
            e.get("from_partitions"),
            {int(p): int(o) for p, o in (e.get("thresholds") or {}).items()},
        )
        for e in history.get("epochs") or []
        if e.get("state") == "active"
    ]


def epoch_of(epochs: Sequence[ActiveEpoch], partition: int, offset: int) -> int:
    """The epoch a stored record belongs to: the latest that created its partition, or whose
    threshold in its (old) partition it is at or past."""
    found = 0
    for e in epochs:
        if e.from_partitions is None:
            continue
        created = e.from_partitions <= partition < e.partitions
        if created or offset >= e.thresholds.get(partition, offset + 1):
            found = max(found, e.epoch)
    return found


def check_topic(
    topic: str,
    records: Iterable[StoredRecord],
    epochs: Sequence[ActiveEpoch] = (),
    expected: Mapping[str, int] | None = None,
    unreadable: int = 0,
    numbered: bool = True,
) -> TopicVerdict:
    """Count duplicates, missing records and per-key order violations. ``expected``: key → how many
    numbers (0..n-1) the source holds; without it, a number below a key's highest that is absent
    counts as missing. ``numbered=False``: the records' numbers are their offsets, not the key's
    sequence; only each key's partition per epoch is checked."""
    placed = [(epoch_of(epochs, r.partition, r.offset), r) for r in records]
    placed.sort(key=lambda er: (er[0], er[1].partition, er[1].offset))
    stored = [r for _, r in placed]
    check = KeyOrder()
    for i, r in enumerate(stored):
        check.add(r.key, r.seq if numbered else i, f"p{r.partition}@{r.offset}")
    misplaced = _misplaced(placed)
    if not numbered:
        expected = {}
    if expected is None:
        expected = {key: max(numbers) + 1 for key, numbers in check.seen.items()}
        total = None
    else:
        total = sum(expected.values())
    missing = check.lost(dict(expected))
    extra = [key for key in check.seen if key not in expected]
    examples = list(check.examples) + [
        f"{r.key} #{r.seq} (p{r.partition}@{r.offset}) in epoch {e}, "
        f"whose other records of the key are in p{home}"
        for e, r, home in misplaced[:5]
    ]
    if extra:
        examples.append(f"{len(extra)} key(s) the source does not have, e.g. {extra[0]}")
    return TopicVerdict(
        topic=topic,
        records=check.records,
        keys=len(check.seen),
        partitions=len({r.partition for r in stored}),
        epochs=max(1, len(epochs)),
        duplicates=check.duplicates,
        missing=missing,
        order_violations=check.order_violations + len(misplaced),
        misplaced=len(misplaced),
        unreadable=unreadable,
        expected=total,
        numbered=numbered,
        examples=examples,
    )


def _misplaced(placed: Sequence[tuple[int, StoredRecord]]) -> list[tuple[int, StoredRecord, int]]:
    """(epoch, record, the key's partition in that epoch) of each record outside the partition
    that holds most of its key's records of its epoch."""
    counts: dict[tuple[str, int], Counter[int]] = defaultdict(Counter)
    for epoch, r in placed:
        counts[(r.key, epoch)][r.partition] += 1
    home = {where: c.most_common(1)[0][0] for where, c in counts.items() if len(c) > 1}
    return [
        (epoch, r, home[(r.key, epoch)])
        for epoch, r in placed
        if (r.key, epoch) in home and r.partition != home[(r.key, epoch)]
    ]


def _reader(kafka_config: Mapping[str, Any], errors: BrokerErrors) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        logged(
            {
                **kafka_config,
                "group.id": f"ordo-verify-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "error_cb": errors,
            }
        )
    )


def _topics(consumer: Any, errors: BrokerErrors, kafka_config: Mapping[str, Any]) -> Any:
    """Every topic's metadata (all topics, not one: asking for an unknown topic may create it)."""
    return cluster_metadata(consumer, errors, str(kafka_config.get("bootstrap.servers")), 10).topics


@dataclass(frozen=True)
class ReadProgress:
    """How far ``read_topic`` is: records read, and offsets read of those there were to read when
    it began (offsets, not records: transaction markers take offsets too)."""

    records: int
    offsets: int
    offsets_to_read: int


def _log_ranges(consumer: Any, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
    """Each partition's (log start, end) as the read begins."""
    from confluent_kafka import TopicPartition

    return {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
        for p in partitions
    }


def _progress(
    read: TopicRecords, consumer: Any, topic: str, ranges: dict[int, tuple[int, int]], to_read: int
) -> ReadProgress:
    """How far the read is: the consumer's positions (asked only when progress is told, nothing
    per record) against the log starts the read began from."""
    from confluent_kafka import TopicPartition

    at = consumer.position([TopicPartition(topic, p) for p in ranges])
    offsets = sum(max(0, tp.offset - ranges[tp.partition][0]) for tp in at if tp.offset >= 0)
    return ReadProgress(len(read.records) + read.unreadable, min(offsets, to_read), to_read)


def read_topic(
    kafka_config: Mapping[str, Any],
    topic: str,
    timeout: float = 60.0,
    *,
    layout: RecordLayout,
    samples: int = 5,
    progress: Callable[[ReadProgress], None] | None = None,
    progress_every: float = 1.0,
) -> TopicRecords:
    """Every committed record of ``topic`` that ``layout`` reads, how many it could not read and the
    first ``samples`` of those. Raises LookupError when the topic does not exist, TimeoutError when
    it cannot be read to its end. ``progress`` hears how far the read is every ``progress_every``
    seconds."""
    from confluent_kafka import KafkaError, TopicPartition

    errors = BrokerErrors()
    consumer = _reader(kafka_config, errors)
    try:
        metadata = _topics(consumer, errors, kafka_config).get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            raise LookupError(f"topic {topic!r} does not exist")
        partitions = sorted(metadata.partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        read = TopicRecords([])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        ranges = _log_ranges(consumer, topic, partitions) if progress is not None else {}
        to_read = sum(max(0, high - low) for low, high in ranges.values())
        said = time.monotonic()
        while len(at_end) < len(partitions):
            if progress is not None and time.monotonic() - said >= progress_every:
                said = time.monotonic()
                progress(_progress(read, consumer, topic, ranges, to_read))
            if time.monotonic() > deadline:
                left = sorted(set(partitions) - at_end)
                raise TimeoutError(f"could not read partitions {left} of {topic!r} to their end")
            for message in consumer.consume(1000, 0.5):
                error = message.error()
                p = message.partition() or 0
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"reading {topic!r}: {error}")
                    at_end.add(p)
                    continue
                at_end.discard(p)
                raw = RawRecord(p, message.offset() or 0, message.key(), message.value(),
                                tuple(message.headers() or ()))  # fmt: skip
                found = layout.read(raw)
                if found is None:
                    read.unreadable += 1
                    if len(read.samples) < samples:
                        read.samples.append(raw)
                else:
                    read.records.append(StoredRecord(p, raw.offset, *found))
        return read
    finally:
        drain(consumer)  # log lines queued since the last consume (a record it takes is not needed)
        consumer.close()


def read_epoch_log(
    kafka_config: Mapping[str, Any], epoch_topic: str = DEFAULT_EPOCH_TOPIC, timeout: float = 30.0
) -> dict[str, dict[str, Any]]:
    """Every topic's latest history in the epoch log, as plain JSON ({} when there is no log)."""
    from confluent_kafka import KafkaError, TopicPartition

    errors = BrokerErrors()
    consumer = _reader(kafka_config, errors)
    try:
        if epoch_topic not in _topics(consumer, errors, kafka_config):  # never auto-create it
            return {}
        consumer.assign([TopicPartition(epoch_topic, 0, 0)])
        latest: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return latest
                raise RuntimeError(f"reading {epoch_topic!r}: {error}")
            try:
                latest[(message.key() or b"").decode(errors="replace")] = json.loads(message.value() or b"")
            except ValueError:
                continue  # not a history: the log's readers skip it too
        raise TimeoutError(f"could not read the epoch log {epoch_topic!r} to its end")
    finally:
        drain(consumer)
        consumer.close()


def read_epochs(
    kafka_config: Mapping[str, Any], topic: str, epoch_topic: str = DEFAULT_EPOCH_TOPIC, timeout: float = 30.0
) -> list[ActiveEpoch]:
    """The topic's active epochs from the epoch log ([] if it has none)."""
    history = read_epoch_log(kafka_config, epoch_topic, timeout).get(topic)
    return parse_epochs(history) if history else []
