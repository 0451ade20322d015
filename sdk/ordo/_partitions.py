"""Waiting until the broker serves a topic's partitions, not merely lists them.

CreateTopics and CreatePartitions answer, and the metadata lists the new partitions, before the
broker hosts them: it opens their logs one by one and answers NOT_LEADER_FOR_PARTITION until
then. An idempotent producer that writes to a partition in that window can be told its first
batch was written when it was not: acknowledged without an offset (Kafka 4.3.1, librdkafka 2.16;
docs/reliability.md). Whoever creates partitions and then has records written to them waits here
first: the operator before it publishes an epoch, the testbed before a test produces.
"""

from __future__ import annotations

import time

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

__all__ = ["await_served", "end_offsets"]


def end_offsets(admin: AdminClient, topic: str, partitions: int, timeout: float) -> dict[int, int]:
    """The log end of partitions 0..partitions-1, each answered by its leader (read_uncommitted).
    Raises KafkaException when a partition's leader does not answer for it."""
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    request = {TopicPartition(topic, p): latest for p in range(partitions)}
    futures = admin.list_offsets(
        request, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=timeout
    )
    return {tp.partition: future.result(timeout=timeout + 5).offset for tp, future in futures.items()}


def await_served(admin: AdminClient, topic: str, partitions: int, timeout: float) -> None:
    """Return once the leader of each of partitions 0..partitions-1 answers ListOffsets for it;
    TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            end_offsets(admin, topic, partitions, timeout)
            return
        except KafkaException as error:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"partitions of {topic!r} are created but not all served by a leader "
                    f"after {timeout:g}s: {error}"
                ) from error
        # the admin client finds leaders in its own metadata: refresh it, then ask again
        admin.list_topics(topic, timeout=timeout)
        time.sleep(0.05)
