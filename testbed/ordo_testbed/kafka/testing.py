"""Condition waits and consume loops for tests against the Kafka testbed (or a real Kafka)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from ordo_testbed.waiting import wait_for

__all__ = [
    "await_records",
    "committed_records",
    "consume",
    "end_offsets",
    "records_per_partition",
    "values",
    "wait_for",
]


def consume(consumer: Consumer, count: int | None = None, *, until_eof: int | None = None,
            timeout: float = 20.0) -> list[Message]:  # fmt: skip
    """Messages until ``count`` arrived or ``until_eof`` partitions reported EOF (needs
    enable.partition.eof)."""
    messages: list[Message] = []
    eofs: set[tuple[str | None, int | None]] = set()
    deadline = time.monotonic() + timeout
    while True:
        if count is not None and len(messages) >= count:
            return messages
        if until_eof is not None and len(eofs) >= until_eof:
            return messages
        if time.monotonic() > deadline:
            raise AssertionError(f"consumed {len(messages)} (eof {sorted(eofs)}) before timeout")
        message = consumer.poll(0.2)
        if message is None:
            continue
        error = message.error()
        if error is None:
            messages.append(message)
            eofs.discard((message.topic(), message.partition()))
        elif error.code() == KafkaError._PARTITION_EOF:
            eofs.add((message.topic(), message.partition()))
        else:
            raise AssertionError(f"consumer error: {error}")


def values(messages: list[Message]) -> list[Any]:
    return [m.value() for m in messages]


def end_offsets(
    bootstrap: str, topic: str, partitions: int | Iterable[int], isolation: str = "read_uncommitted"
) -> dict[int, int]:
    """Each partition's end offset, asked of the broker now (read_committed: its last stable
    offset). ``partitions``: a count (0..n-1) or the partitions themselves."""
    wanted = list(range(partitions) if isinstance(partitions, int) else partitions)
    probe = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "ordo-end-offsets", "isolation.level": isolation}
    )
    try:
        # a new client learns a topic's partitions from its first metadata: right after an
        # expansion that may not list the new ones yet, and librdkafka refuses to ask about a
        # partition it does not know (_UNKNOWN_PARTITION)
        wait_for(
            lambda: _lists(probe, topic, wanted), 30, f"the metadata of {topic} to list {wanted}", step=0.1
        )
        return {p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in wanted}
    finally:
        probe.close()


def _lists(client: Consumer, topic: str, partitions: Iterable[int]) -> bool:
    """Whether ``client``'s metadata, asked for ``topic`` now, lists every one of ``partitions``."""
    found = client.list_topics(topic, timeout=10).topics.get(topic)
    return found is not None and found.error is None and set(partitions) <= set(found.partitions)


def _stable_ends(bootstrap: str, topic: str, partitions: int, settle: float = 5.0) -> dict[int, int]:
    """Each partition's last stable offset, once it reaches the end offset read first: a commit
    returns before the coordinator's markers reach the partitions, and until they do the last
    stable offset still stops at the transaction's first record. A transaction that stays open
    longer than ``settle`` (a stalled producer's) leaves it where it is."""
    high = end_offsets(bootstrap, topic, partitions)
    stable: dict[int, int] = {}
    probe = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "ordo-end-offsets", "isolation.level": "read_committed"}
    )

    def caught_up() -> bool:
        for p in range(partitions):
            stable[p] = probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        return all(stable[p] >= high[p] for p in stable)

    try:  # one probe for every look: a client per look would cost a connection each 50 ms
        with contextlib.suppress(AssertionError):
            wait_for(caught_up, settle, "the last stable offsets to reach the ends", step=0.05)
    finally:
        probe.close()
    return stable


def records_per_partition(
    bootstrap: str, topic: str, partitions: int, timeout: float = 20.0
) -> dict[int, int]:
    """How many committed records each of partitions 0..n-1 of ``topic`` holds, read to their
    last stable offset (read_committed): offsets count transaction markers and aborted records
    too, which an OrderedProducer's own transactions leave in every partition they write."""
    ends = _stable_ends(bootstrap, topic, partitions)
    counts = dict.fromkeys(range(partitions), 0)
    wanted = {p for p, end in ends.items() if end > 0}
    if not wanted:
        return counts
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ordo-records-per-partition",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        reader.assign([TopicPartition(topic, p, 0) for p in wanted])
        deadline = time.monotonic() + timeout
        while wanted:
            if time.monotonic() > deadline:
                raise AssertionError(f"partitions {sorted(wanted)} of {topic} not read to their end")
            message = reader.poll(0.2)
            if message is None:
                continue
            error, partition = message.error(), message.partition()
            assert partition is not None
            if error is None:
                counts[partition] += 1
            elif error.code() != KafkaError._PARTITION_EOF:
                raise AssertionError(f"consumer error: {error}")
            offset = message.offset()
            if partition in wanted and offset is not None and offset + 1 >= ends[partition]:
                wanted.discard(partition)  # (an EOF's offset is the end itself)
        return counts
    finally:
        reader.close()


def records_in(bootstrap: str, topic: str, partitions: int) -> int:
    """How many records (and transaction markers) partitions 0..n-1 of ``topic`` hold: the sum of
    their end offsets."""
    return sum(end_offsets(bootstrap, topic, partitions).values())


def committed_records(bootstrap: str, topic: str, partitions: int) -> int:
    """How many committed records partitions 0..n-1 of ``topic`` hold (``records_per_partition``)."""
    return sum(records_per_partition(bootstrap, topic, partitions).values())


def await_records(bootstrap: str, topic: str, partitions: int, more: int, timeout: float = 60.0) -> int:
    """Wait until ``topic`` holds ``more`` committed records beyond what it holds now (traffic, not
    time); returns the count then. Records, not offsets: the transactions of ordo's producers put
    a marker in every partition they write, as many as the records at low rates."""
    wanted = committed_records(bootstrap, topic, partitions) + more
    return wait_for(
        lambda: (n := committed_records(bootstrap, topic, partitions)) >= wanted and n,
        timeout,
        f"{more} more records",
        step=0.25,
    )
