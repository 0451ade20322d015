"""A topic's epoch history (docs/architecture.md): the pure model the operator writes and clients read.

Each epoch is a partition count. Epoch 0 is the topic as ordo first saw it; every expansion
appends an epoch in state ``fencing`` that becomes ``active`` (with the old partitions' end
offsets, the thresholds) or ``aborted``. Only active epochs change where keys go.

An epoch may also move the stream to another topic (``Epoch.topic``, issue 44): from it on the
keys live in that topic, under its partition count, fewer or more than before. Its prior sets are
those of an expansion between the same counts, except that every partition of the new topic is
new: partition q waits for the old partition q too.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from math import gcd
from typing import Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

__all__ = ["Epoch", "EpochError", "EpochHistory", "EpochState", "epoch_of", "prior_map", "prior_of"]

SCHEMA_VERSION: Literal[1] = 1


class EpochError(ValueError):
    """An epoch history or transition that cannot be right; the message says what to fix."""


class EpochState(StrEnum):
    FENCING = "fencing"
    ACTIVE = "active"
    ABORTED = "aborted"


def prior_of(old: int, new: int, q: int, moved: bool = False) -> tuple[int, ...]:
    """The *other* partitions under ``old`` where a key now in partition ``q`` (of ``new``) may
    have been (see ``prior_map``); with ``moved`` (``new`` partitions of another topic) the old
    partition q as well, since it is not the same partition. O(old / gcd): the map of a whole
    expansion is not needed for one partition's gate, and can be large (1000 -> 1024: 128,000
    entries)."""
    g = gcd(old, new)
    return tuple(p for p in range(q % g, old, g) if moved or p != q)


def prior_map(old: int, new: int) -> dict[int, tuple[int, ...]]:
    """For each partition q under ``new`` partitions, the *other* partitions under ``old`` where a
    key now in q may have been: ``{p < old : p ≡ q (mod gcd(old, new))} - {q}``.

    Exact for modulo placement of any hash: h ≡ q (mod new) and h ≡ p (mod old) have a common
    solution h iff p ≡ q (mod gcd). Partitions with no prior partitions are left out.
    """
    if old < 1 or new <= old:
        raise EpochError(f"an expansion needs 1 <= old < new partitions, got {old} -> {new}")
    g = gcd(old, new)
    result: dict[int, tuple[int, ...]] = {}
    for q in range(new):
        prior = tuple(p for p in range(q % g, old, g) if p != q)
        if prior:
            result[q] = prior
    return result


class Epoch(BaseModel):
    """One entry of a topic's epoch history."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    epoch: int = Field(ge=0, description="Epoch number, 0 for the topic as first seen.")
    partitions: int = Field(ge=1, description="Partition count producers use in this epoch.")
    topic: str | None = Field(
        default=None,
        min_length=1,
        max_length=249,
        pattern=r"^[a-zA-Z0-9._-]+$",
        description="The topic the stream moves to in this epoch (None: it stays where it was).",
    )
    state: EpochState
    from_partitions: int | None = Field(
        default=None, ge=1, description="Partition count of the previous active epoch (None for epoch 0)."
    )
    thresholds: dict[int, int] = Field(
        default_factory=dict, description="End offset of every old partition at the fence."
    )

    @model_validator(mode="before")
    @classmethod
    def _derived_prior(cls, data: object) -> object:
        """Histories written before the prior map was derived carry it as ``prior``: it follows
        from the two partition counts (``prior_of``), so it is dropped, not stored; it grew with
        partitions²/gcd and made the record outgrow Kafka's 1 MB (a 1000 -> 1024 expansion)."""
        if isinstance(data, dict) and "prior" in data:
            data = {k: v for k, v in data.items() if k != "prior"}
        return data

    @model_serializer(mode="wrap")
    def _without_unmoved_topic(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """An epoch that does not move writes no ``topic``: what readers before issue 44 accept."""
        data: dict[str, object] = handler(self)
        if data.get("topic") is None:
            data.pop("topic", None)
        return data

    @property
    def moves(self) -> bool:
        """Whether this epoch moves the stream to another topic."""
        return self.topic is not None

    def prior_of(self, partition: int) -> tuple[int, ...]:
        """The old partitions that gate ``partition`` in this epoch (none for epoch 0)."""
        if self.from_partitions is None:
            return ()
        return prior_of(self.from_partitions, self.partitions, partition, moved=self.moves)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.epoch == 0:
            if (
                self.from_partitions is not None
                or self.thresholds
                or self.state != EpochState.ACTIVE
                or self.moves
            ):
                raise EpochError(
                    "epoch 0 must be active, with no from_partitions, no thresholds and no topic to move to"
                )
            return self
        if self.from_partitions is None:
            raise EpochError(f"epoch {self.epoch}: from_partitions is required")
        if not self.moves and self.partitions <= self.from_partitions:
            raise EpochError(
                f"epoch {self.epoch}: partitions {self.partitions} must be larger than "
                f"from_partitions {self.from_partitions}"
            )
        if self.state == EpochState.ACTIVE:
            if set(self.thresholds) != set(range(self.from_partitions)):
                raise EpochError(
                    f"epoch {self.epoch}: active epochs need a threshold for every old partition"
                )
            if any(offset < 0 for offset in self.thresholds.values()):
                raise EpochError(f"epoch {self.epoch}: thresholds must not be negative")
        return self

    def created(self, partition: int) -> bool:
        """Whether this epoch created ``partition`` (every partition of the topic it moves to)."""
        if self.from_partitions is None:
            return False
        return (
            partition < self.partitions if self.moves else self.from_partitions <= partition < self.partitions
        )


class EpochHistory(BaseModel):
    """The whole epoch history of one topic: the value of its key in the epoch log."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    topic: str = Field(min_length=1)
    epochs: tuple[Epoch, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        previous_active: Epoch | None = None
        stream = self.topic  # where the keys live before each epoch
        for index, entry in enumerate(self.epochs):
            if entry.topic == stream:
                raise EpochError(
                    f"{self.topic}: epoch {entry.epoch} moves the stream to {stream}, where it is"
                )
            if index > 0 and entry.epoch <= self.epochs[index - 1].epoch:
                raise EpochError(
                    f"{self.topic}: epoch numbers must increase, got {entry.epoch} after "
                    f"{self.epochs[index - 1].epoch}"
                )
            if entry.state == EpochState.FENCING and index != len(self.epochs) - 1:
                raise EpochError(f"{self.topic}: only the last epoch may be fencing (epoch {entry.epoch})")
            if index == 0:
                if entry.epoch != 0:
                    raise EpochError(f"{self.topic}: the first epoch must be epoch 0")
            elif previous_active is not None and entry.from_partitions != previous_active.partitions:
                raise EpochError(
                    f"{self.topic}: epoch {entry.epoch} starts from {entry.from_partitions} partitions "
                    f"but the active count before it is {previous_active.partitions}"
                )
            if entry.state == EpochState.ACTIVE:
                previous_active = entry
                stream = entry.topic or stream
        return self

    @classmethod
    def initial(cls, topic: str, partitions: int) -> EpochHistory:
        return cls(topic=topic, epochs=(Epoch(epoch=0, partitions=partitions, state=EpochState.ACTIVE),))

    @property
    def current(self) -> Epoch:
        """The latest entry, whatever its state."""
        return self.epochs[-1]

    @property
    def active(self) -> Epoch:
        """The latest active epoch: the partition count producers use when not fenced."""
        return self.active_epochs[-1]

    @property
    def active_epochs(self) -> tuple[Epoch, ...]:
        return tuple(e for e in self.epochs if e.state == EpochState.ACTIVE)

    @property
    def fencing(self) -> bool:
        return self.current.state == EpochState.FENCING

    @property
    def stream_topic(self) -> str:
        """The topic the keys live in now: the last active move's, else this history's own."""
        return next((e.topic for e in reversed(self.active_epochs) if e.topic is not None), self.topic)

    def begin_move(self, topic: str, partitions: int) -> EpochHistory:
        """Append a ``fencing`` epoch that moves the stream to ``partitions`` partitions of
        ``topic`` (any count, fewer included); idempotent for the same target."""
        if self.fencing:
            if (self.current.topic, self.current.partitions) == (topic, partitions):
                return self
            raise EpochError(
                f"{self.topic}: epoch {self.current.epoch} is still fencing towards "
                f"{self.current.topic or self.stream_topic} with {self.current.partitions} partitions"
            )
        entry = Epoch(
            epoch=self.current.epoch + 1,
            partitions=partitions,
            state=EpochState.FENCING,
            from_partitions=self.active.partitions,
            topic=topic,
        )
        return EpochHistory(topic=self.topic, epochs=(*self.epochs, entry))

    def begin_fence(self, partitions: int) -> EpochHistory:
        """Append a ``fencing`` epoch towards ``partitions``; idempotent for the same target."""
        if self.fencing:
            if self.current.partitions == partitions:
                return self
            raise EpochError(
                f"{self.topic}: epoch {self.current.epoch} is still fencing towards {self.current.partitions}"
            )
        base = self.active.partitions
        if partitions <= base:
            raise EpochError(
                f"{self.topic}: target {partitions} partitions must be larger than today's {base}"
            )
        entry = Epoch(
            epoch=self.current.epoch + 1,
            partitions=partitions,
            state=EpochState.FENCING,
            from_partitions=base,
        )
        return EpochHistory(topic=self.topic, epochs=(*self.epochs, entry))

    def publish(self, thresholds: dict[int, int]) -> EpochHistory:
        """Mark the fencing epoch active with the thresholds read at the fence."""
        entry = self._fencing_entry("publish")
        assert entry.from_partitions is not None
        missing = sorted(set(range(entry.from_partitions)) - set(thresholds))
        if missing or set(thresholds) - set(range(entry.from_partitions)):
            raise EpochError(
                f"{self.topic}: epoch {entry.epoch} needs a threshold for every old partition "
                f"0..{entry.from_partitions - 1}, missing {missing}"
            )
        if any(offset < 0 for offset in thresholds.values()):
            raise EpochError(f"{self.topic}: epoch {entry.epoch}: thresholds must not be negative")
        done = Epoch(
            epoch=entry.epoch,
            partitions=entry.partitions,
            state=EpochState.ACTIVE,
            from_partitions=entry.from_partitions,
            thresholds=dict(thresholds),
            topic=entry.topic,
        )
        return EpochHistory(topic=self.topic, epochs=(*self.epochs[:-1], done))

    def why_not_after(self, previous: EpochHistory) -> str | None:
        """Why this history cannot follow ``previous`` in the log, or None when it can. A history
        only grows: it keeps every epoch, and the last one may only go from fencing to active or
        aborted. Anything else is a replayed or forged record (e.g. a write that reached the
        broker late), which readers refuse."""
        if len(self.epochs) < len(previous.epochs):
            return "the history drops epochs"
        for old, new in zip(previous.epochs, self.epochs, strict=False):
            concluded = old.state == EpochState.FENCING and new.state != EpochState.FENCING
            if old != new and not (concluded and new.epoch == old.epoch):
                return f"the history rewrites epoch {old.epoch} ({old.state} -> {new.state})"
        return None

    def abort(self) -> EpochHistory:
        """Mark the fencing epoch aborted: producers go on with the previous count."""
        entry = self._fencing_entry("abort")
        aborted = entry.model_copy(update={"state": EpochState.ABORTED})
        return EpochHistory(topic=self.topic, epochs=(*self.epochs[:-1], aborted))

    def _fencing_entry(self, action: str) -> Epoch:
        if not self.fencing:
            raise EpochError(f"{self.topic}: cannot {action}: no epoch is fencing")
        return self.current

    def epoch_of(self, partition: int, offset: int) -> Epoch | None:
        """The active epoch a record at (partition, offset) was produced in, or None when no active
        epoch has that partition yet (created but not yet published)."""
        return epoch_of(self.active_epochs, partition, offset)


def epoch_of(active: Sequence[Epoch], partition: int, offset: int) -> Epoch | None:
    """``EpochHistory.epoch_of`` given its active epochs (a GateKeeper keeps them: deriving them
    per record walked the whole history each time). A history that moved to another topic is
    refused: which epoch a record belongs to then depends on the record's topic, and the consumers
    do not follow a move yet (issue 44)."""
    if any(entry.moves for entry in active):
        raise EpochError("this history moved its stream to another topic, which this reader cannot follow")
    for entry in reversed(active):
        if partition >= entry.partitions:
            return None
        if entry.from_partitions is None or entry.created(partition):
            return entry
        if offset >= entry.thresholds[partition]:
            return entry
    return None  # pragma: no cover - epoch 0 always matches a partition below its count
