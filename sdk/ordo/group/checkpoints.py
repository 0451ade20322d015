"""Restart checkpoints of source partitions (KIP-509).

A compacted topic of one partition, key ``<namespace>/<group>/<partition>``; the last committed
value per key wins. In exactly-once mode a checkpoint is written in the same Kafka transaction as
the data it covers, so it is never ahead of the data; readers use read_committed.

Each record carries the assignment generation it was written under, and an at-least-once reader
refuses one of an older generation than the last it accepted for that partition: nothing
fences a paused member that wakes after its partitions moved, and its late checkpoint would move
the restart point back. A new owner (at-least-once) first writes a *takeover* record in its
generation, which keeps the restart point where it is and so refuses every older owner's later
write (docs/reliability.md, "At-least-once zombies").
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka.admin import AdminClient
from pydantic import BaseModel, ConfigDict, Field, model_validator

from .._compacted import CompactedTopicReader, ensure_compacted_topics
from ..control_topics import DEFAULT_CHECKPOINT_TOPIC
from ..member_wire import checkpoint_key

__all__ = [
    "Checkpoint",
    "CheckpointLog",
    "applied",
    "ensure_checkpoint_topic",
]


class Checkpoint(BaseModel):
    """One checkpoint record's value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    checkpoint: str | None = Field(description="Where to restart; None only in a takeover record.")
    member: str = Field(description="The pod that wrote it.")
    generation: int = Field(ge=0, description="The assignment generation it was written under.")
    written_at_ms: int = Field(ge=0)
    takeover: bool = Field(
        default=False,
        description="Written by a new owner before it starts: the restart point stays the one "
        "before it (``checkpoint`` is what the owner had read, for a reader that finds nothing "
        "before it once compaction removed it), and the generation rises to the owner's.",
    )

    @model_validator(mode="after")
    def _only_a_takeover_may_lack_a_checkpoint(self) -> Checkpoint:
        if self.checkpoint is None and not self.takeover:
            raise ValueError("a checkpoint record without a checkpoint")
        return self

    @classmethod
    def now(cls, checkpoint: str, member: str, generation: int) -> Checkpoint:
        return cls(
            checkpoint=checkpoint, member=member, generation=generation, written_at_ms=int(time.time() * 1000)
        )

    @classmethod
    def takeover_of(cls, read: Checkpoint | None, member: str, generation: int) -> Checkpoint:
        """A new owner's takeover record, after it read ``read``."""
        return cls(
            checkpoint=read.checkpoint if read is not None else None,
            member=member,
            generation=generation,
            written_at_ms=int(time.time() * 1000),
            takeover=True,
        )

    def encode(self) -> bytes:
        # without a false ``takeover``: an ordinary record stays what older readers accept
        return self.model_dump_json(exclude_defaults=True).encode()


def applied(previous: Checkpoint | None, record: Checkpoint, exactly_once: bool = False) -> Checkpoint | str:
    """What a reader holds for a source partition after ``record``, or why it refuses it.

    ``exactly_once``: the record was committed in its unit's transaction, and a new owner's
    ``init_transactions`` fences every earlier writer of the partition, so commit order is owner
    order and the last record stands whatever generation it carries. A member that takes its
    partitions again from an assignment gone stale during a pause fences the owner that had them,
    reads their last checkpoint and goes on from it: refusing its records by their older
    generation made readers restart behind them (a soak chaos run: checkpoint 2550 -> 2490)."""
    if exactly_once:
        return record
    if previous is not None and record.generation < previous.generation:
        return (
            f"stale checkpoint {record.checkpoint!r} of generation {record.generation} by "
            f"{record.member}: generation {previous.generation} (by {previous.member}) was read "
            "before it, so its writer no longer owns the partition"
        )
    if record.takeover and previous is not None:
        return record.model_copy(update={"checkpoint": previous.checkpoint})
    return record


class CheckpointLog(CompactedTopicReader[Checkpoint]):
    """A background reader of the checkpoint topic (read_committed). Thread-safe. Stale records
    (``applied``) are refused, logged and counted in ``stale_records`` (and ``invalid_records``)."""

    def __init__(
        self,
        kafka_config: Mapping[str, Any],
        topic: str = DEFAULT_CHECKPOINT_TOPIC,
        exactly_once: bool = False,
    ) -> None:
        """``exactly_once``: the group's mode (``applied``): its records are never refused."""
        self.stale_records = 0
        self.exactly_once = exactly_once
        super().__init__(kafka_config, topic)

    def parse(self, key: str, value: bytes) -> Checkpoint:
        if key.count("/") != 2:
            raise ValueError("the key is not <namespace>/<group>/<partition>")
        return Checkpoint.model_validate_json(value)

    def accept(self, key: str, previous: Checkpoint | None, value: Checkpoint) -> str | None:
        outcome = applied(previous, value, self.exactly_once)
        if isinstance(outcome, str):
            self.stale_records += 1
            return outcome
        return None

    def merge(self, key: str, previous: Checkpoint | None, value: Checkpoint) -> Checkpoint:
        outcome = applied(previous, value, self.exactly_once)
        assert not isinstance(outcome, str)  # accept() refused it otherwise
        return outcome

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
    admin: AdminClient, topic: str = DEFAULT_CHECKPOINT_TOPIC, replication: int | None = None
) -> None:
    """Create the checkpoint topic (compacted, one partition) if it is missing, replicated as
    ordo creates every control topic (``ensure_compacted_topics``)."""
    ensure_compacted_topics(admin, [topic], replication)
