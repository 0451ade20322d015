"""Restart checkpoints of source partitions (KIP-509).

A compacted topic of one partition, key ``<namespace>/<group>/<partition>``; the last committed
value per key wins. In exactly-once mode a checkpoint is written in the same Kafka transaction as
the data it covers, so it is never ahead of the data; readers use read_committed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka.admin import AdminClient
from pydantic import BaseModel, ConfigDict, Field

from .._tail import CompactedTopicReader, ensure_compacted_topics
from ..protocol import DEFAULT_CHECKPOINT_TOPIC, checkpoint_key

__all__ = [
    "DEFAULT_CHECKPOINT_TOPIC",
    "Checkpoint",
    "CheckpointLog",
    "ensure_checkpoint_topic",
]


class Checkpoint(BaseModel):
    """One checkpoint record's value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    checkpoint: str
    member: str = Field(description="The pod that wrote it.")
    generation: int = Field(ge=0, description="The assignment generation it was written under.")
    written_at_ms: int = Field(ge=0)

    @classmethod
    def now(cls, checkpoint: str, member: str, generation: int) -> Checkpoint:
        return cls(
            checkpoint=checkpoint, member=member, generation=generation, written_at_ms=int(time.time() * 1000)
        )

    def encode(self) -> bytes:
        return self.model_dump_json().encode()


class CheckpointLog(CompactedTopicReader[Checkpoint]):
    """A background reader of the checkpoint topic (read_committed). Thread-safe."""

    def __init__(self, kafka_config: Mapping[str, Any], topic: str = DEFAULT_CHECKPOINT_TOPIC) -> None:
        super().__init__(kafka_config, topic)

    def parse(self, key: str, value: bytes) -> Checkpoint:
        if key.count("/") != 2:
            raise ValueError("the key is not <namespace>/<group>/<partition>")
        return Checkpoint.model_validate_json(value)

    def of(self, namespace: str, group: str, partition: int) -> Checkpoint | None:
        return self.get(checkpoint_key(namespace, group, partition))

    def of_group(self, namespace: str, group: str) -> dict[int, Checkpoint]:
        """Every checkpoint of one group, by source partition."""
        prefix = checkpoint_key(namespace, group, 0)[:-1]
        found: dict[int, Checkpoint] = {}
        for key, value in self.snapshot().items():
            if key.startswith(prefix) and key[len(prefix) :].isdigit():
                found[int(key[len(prefix) :])] = value
        return found


def ensure_checkpoint_topic(
    admin: AdminClient, topic: str = DEFAULT_CHECKPOINT_TOPIC, replication: int = -1
) -> None:
    """Create the checkpoint topic (compacted, one partition) if it is missing."""
    ensure_compacted_topics(admin, [topic], replication)
