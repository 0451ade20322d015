"""The independent verifier of a ProducerGroup's output: reads the data topic with
read_committed and checks that every source record is there exactly once, in source order per
source partition. It shares nothing with the SDK but the record format of ``group_member``."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise

from confluent_kafka import Consumer, KafkaError, TopicPartition

from ordo_sandbox.kafka_settings import Kafka, settings_of

__all__ = ["SourceVerdict", "verify_sources"]


@dataclass
class SourceVerdict:
    records: int = 0
    missing: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    beyond: int = 0
    """Records past the expected count: data ahead of (not covered by) its checkpoint."""
    members: set[str] = field(default_factory=set)
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.duplicates == 0 and self.out_of_order == 0 and self.beyond == 0

    def summary(self) -> str:
        return (
            f"{self.records} records from {len(self.members)} member(s): missing {self.missing}, "
            f"duplicates {self.duplicates}, out of order {self.out_of_order}, "
            f"beyond the checkpoint {self.beyond}"
        )


def verify_sources(
    kafka: Kafka, topic: str, per_partition: dict[int, int], timeout: float = 60.0
) -> SourceVerdict:
    """``per_partition``: source partition -> how many records it must hold (0..n-1); ``kafka``:
    a bootstrap or the connection's settings."""
    seen: dict[int, list[int]] = defaultdict(list)
    # Order is only defined within one Kafka partition: after an expansion a source partition's
    # key moves, and the partitions are read side by side (the gate is the consumers' business).
    placed: dict[tuple[int, int], list[int]] = defaultdict(list)
    where: dict[tuple[int, int], str] = {}  # (source partition, seq) -> first partition@offset by member
    verdict = SourceVerdict()
    consumer = Consumer(
        {
            **settings_of(kafka),
            "group.id": "ordo-source-verifier",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        ends: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(ends) < len(partitions):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"verifier: partitions {sorted(set(partitions) - ends)} not read to the end"
                )
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    ends.add(message.partition() or 0)
                    continue
                raise AssertionError(f"verifier: {error}")
            ends.discard(message.partition() or 0)
            record = json.loads(message.value() or b"{}")
            seen[record["p"]].append(record["seq"])
            placed[record["p"], message.partition() or 0].append(record["seq"])
            at = f"{message.partition()}@{message.offset()} by {record['member']}"
            first = where.setdefault((record["p"], record["seq"]), at)
            if first != at and len(verdict.examples) < 10:
                verdict.examples.append(f"source partition {record['p']} #{record['seq']}: {first} and {at}")
            verdict.members.add(record["member"])
            verdict.records += 1
    finally:
        consumer.close()
    for p, expected in sorted(per_partition.items()):
        seqs = seen.get(p, [])
        distinct = set(seqs)
        verdict.duplicates += len(seqs) - len(distinct)
        missing = sorted(set(range(expected)) - distinct)
        verdict.missing += len(missing)
        extra = sorted(d for d in distinct if d >= expected)
        verdict.beyond += len(extra)
        if extra and len(verdict.examples) < 10:
            verdict.examples.append(
                f"source partition {p}: records {extra[:5]} beyond the checkpoint {expected}"
            )
        inversions = sum(
            1 for (q, _), placed_seqs in placed.items() if q == p for a, b in pairwise(placed_seqs) if b < a
        )
        verdict.out_of_order += inversions
        if missing and len(verdict.examples) < 10:
            verdict.examples.append(f"source partition {p}: missing {missing[:5]}")
        if len(seqs) != len(distinct) and len(verdict.examples) < 10:
            verdict.examples.append(f"source partition {p}: {len(seqs) - len(distinct)} duplicate(s)")
    return verdict
