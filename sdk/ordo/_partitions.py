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
from collections.abc import Iterable

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

__all__ = ["await_served", "end_offsets"]


def _ask(
    admin: AdminClient, topic: str, partitions: Iterable[int], timeout: float
) -> dict[int, int | KafkaException]:
    """Each partition's log end as its leader answers ListOffsets (read_uncommitted), or the error."""
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    request = {TopicPartition(topic, p): latest for p in partitions}
    futures = admin.list_offsets(
        request, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=timeout
    )
    answers: dict[int, int | KafkaException] = {}
    for tp, future in futures.items():
        try:
            answers[tp.partition] = future.result(timeout=timeout + 5).offset
        except KafkaException as error:
            answers[tp.partition] = error
    return answers


def end_offsets(admin: AdminClient, topic: str, partitions: int, timeout: float) -> dict[int, int]:
    """The log end of partitions 0..partitions-1, each answered by its leader (read_uncommitted).
    Raises KafkaException when a partition's leader does not answer for it."""
    ends = {}
    for partition, answer in sorted(_ask(admin, topic, range(partitions), timeout).items()):
        if isinstance(answer, KafkaException):
            raise answer
        ends[partition] = answer
    return ends


def await_served(admin: AdminClient, topic: str, partitions: int, timeout: float, first: int = 0) -> None:
    """Return once the leader of each of partitions first..partitions-1 answers ListOffsets for
    it; TimeoutError after ``timeout`` seconds. Each round asks only those not served yet: a
    broker opening 1,024 new logs one by one is not to be asked about all of them every time."""
    deadline = time.monotonic() + timeout
    pending = set(range(first, partitions))
    while True:
        answers = _ask(admin, topic, sorted(pending), timeout)
        failed = {p: a for p, a in answers.items() if isinstance(a, KafkaException)}
        pending = set(failed)
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"partitions of {topic!r} are created but {len(pending)} are not served by a leader "
                f"after {timeout:g}s, e.g. {min(failed)}: {failed[min(failed)]}"
            )
        # the admin client finds leaders in its own metadata: refresh it, then ask again
        admin.list_topics(topic, timeout=timeout)
        time.sleep(0.05)
