"""The OrderedTopicExpansion state machine (docs/architecture.md), pure.

The new partitions are created, and served by their leaders, before producers are fenced: the
producers write on meanwhile (they partition by the active epoch's count, not the broker's), so
they wait only for the fence, the end offsets and the publish, whatever the number of partitions
created (1,024 new partitions take about 30 s to be served on one broker).

A producer that does not acknowledge the fence (paused, frozen, cut off) and has a transactional
id (``fencing="broker"``, the default) is fenced through Kafka: InitProducerId of its id aborts
its open transaction and the broker refuses every later write of it, whatever its clocks say.
Silent ones at once, live ones after the fence's grace. Only producers Kafka cannot fence
(``fencing="lease"``) are still waited out (their session + delivery timeout + a margin).

The shell reads the world (the broker's partition count, the topic's epoch history, the producer
registry), asks ``plan_expansion`` for the next step, records the step's phase in status and only
then performs its effect. Every effect is idempotent and every phase re-derives what is left to
do from the world, so an operator killed at any point resumes correctly.

The publish is the exception to recording first (``Step.record``): the pass that sees every
producer fenced reads the thresholds and publishes at once, with no status write in between, and
the status says Completed after. Nothing about it needs remembering: once every producer
acknowledged (or Kafka fenced it, or a silent one was waited out) only keys whose partition does
not change are written to the old partitions (moved keys' records are parked until the publish),
and such a record is placed right on either side of a threshold, so the end offsets read at any
moment after that are valid thresholds. An operator killed before the publish reads them again;
one killed after it finds the epoch active in the log, thresholds and all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from ordo.api import ExpansionPhase
from ordo.api.common import PAUSE_ANNOTATION, PAUSED
from ordo.control_topics import MAX_CONTROL_RECORD_BYTES
from ordo.epochs import Epoch, EpochError, EpochHistory, EpochState

from .topics import added_outside, first_count

__all__ = [
    "Effect",
    "ExpansionState",
    "InSync",
    "ProducerView",
    "Step",
    "World",
    "next_history",
    "partitions_in_sync",
    "plan_deletion",
    "plan_expansion",
]

TERMINAL = frozenset({ExpansionPhase.COMPLETED, ExpansionPhase.ABORTED, ExpansionPhase.FAILED})
FENCE_POLL_SECONDS = 0.2
PAUSED_POLL_SECONDS = 2.0  # a pause lifted is seen this soon
STRAGGLER_POLL_SECONDS = 1.0  # a straggler that reports again (live, unfenced) is seen this soon
_WIDEST_OFFSET = 2**63 - 1  # for sizing a history before its thresholds are read


class Effect(StrEnum):
    APPEND_FENCE = "append-fence"  # write epoch e in state fencing to the epoch log
    FENCE_PRODUCERS = "fence-producers"  # InitProducerId of producers' transactional ids (Kafka fences them)
    ABORT_EPOCH = "abort-epoch"  # write epoch e as aborted: producers resume at the old count
    CREATE_PARTITIONS = "create-partitions"  # CreatePartitions up to the target
    PUBLISH_EPOCH = "publish-epoch"  # write epoch e as active with its thresholds: those in the
    # state (recorded by an earlier ordo), else every old partition's end offset read just before


@dataclass(frozen=True)
class ProducerView:
    """A live producer of the topic, as the registry shows it."""

    fenced_epoch: int | None = None
    partitioner: str = "murmur2"
    partitions: int | None = None
    """The partition count it reports placing records by (None: an earlier ordo's producer)."""
    transactional_id: str | None = None
    """What Kafka can fence it by (None: fencing=lease or an earlier ordo's producer)."""


@dataclass(frozen=True)
class World:
    """What the shell observed just now."""

    topic_partitions: int | None
    """The broker's partition count; None when the topic does not exist."""
    history: EpochHistory | None
    """The topic's epoch log entry; None when ordo never saw the topic."""
    producers: Mapping[str, ProducerView] = field(default_factory=dict)
    other_expansion: str | None = None
    """Another expansion of the same topic that is in flight (its name)."""
    max_partitions: int = 100_000
    fencing_seconds: float = 0.0
    """Time since this expansion began fencing."""
    stragglers: Mapping[str, float] = field(default_factory=dict)
    """Producers of the topic gone silent without closing or acknowledging this fence, that Kafka
    cannot fence, whose queued records may still land, by id: seconds until they cannot
    (registry.stragglers)."""
    silent: Mapping[str, ProducerView] = field(default_factory=dict)
    """Every producer of the topic gone silent without closing or acknowledging this fence,
    however long ago (registry.silent): those with a transactional id are fenced through Kafka."""
    paused: bool = False
    """The resource's pause annotation is set: an expansion not begun waits; one in flight goes on
    to its end (a pause that held producers fenced would stop the topic's writers)."""


@dataclass(frozen=True)
class ExpansionState:
    """The expansion's own record (its status), as far as the planner needs it."""

    phase: ExpansionPhase = ExpansionPhase.PENDING
    epoch: int | None = None
    from_partitions: int | None = None
    to_partitions: int | None = None
    thresholds: Mapping[int, int] | None = None
    direct: bool = False
    """Round-robin-only topic: expanded without fencing, since there is no key order to keep."""
    served: bool = False
    """Creating: every partition up to the target exists and is served (the effect just returned).
    Not recorded: an operator that restarts creates again, which costs a metadata read."""
    fenced_through_kafka: frozenset[str] = frozenset()
    """Producers this expansion had Kafka fence: they count as fenced."""


@dataclass(frozen=True)
class Step:
    state: ExpansionState
    """The state to record before the effect."""
    effect: Effect | None
    reason: str
    message: str
    requeue: float | None = None
    """Come back after this many seconds (waiting on producers or another expansion)."""
    fence: Mapping[str, str] = field(default_factory=dict)
    """FENCE_PRODUCERS: the producers to fence, by id: their transactional ids."""
    record: bool = True
    """Record the state in status before the effect. False for the publish: it is re-derived from
    the status's epoch and the log, and a status write there would hold the moved keys longer."""

    @property
    def terminal(self) -> bool:
        return self.state.phase in TERMINAL


def _fail(state: ExpansionState, reason: str, message: str) -> Step:
    return Step(ExpansionState(ExpansionPhase.FAILED, state.epoch), None, reason, message)


def plan_expansion(
    topic: str,
    target: int,
    fence_timeout: float,
    state: ExpansionState,
    world: World,
    fence_grace: float = 2.0,
) -> Step:
    """The next step of the expansion of ``topic`` to ``target`` partitions. ``fence_grace``: how
    long the fence waits for a live producer before it has Kafka fence it (at most half the
    timeout)."""
    phase = state.phase
    if phase in TERMINAL:
        return Step(state, None, phase.value, "")
    if phase == ExpansionPhase.PENDING:
        return _validate(topic, target, state, world)
    if phase == ExpansionPhase.CREATING:
        return _create_then_fence(topic, state, world)
    ours = _our_epoch(state, world.history)
    if ours is not None and ours.state == EpochState.ACTIVE:
        published = dict(ours.thresholds) or state.thresholds  # read by the publish's pass
        return Step(
            replace(_at(state, ExpansionPhase.COMPLETED), thresholds=published),
            None,
            "Completed",
            f"{topic} has {state.to_partitions} partitions (epoch {state.epoch})",
        )
    if ours is not None and ours.state == EpochState.ABORTED:
        return Step(_at(state, ExpansionPhase.ABORTED), None, "FenceTimeout", "the fence was aborted")
    if phase == ExpansionPhase.FENCING:
        grace = min(fence_grace, fence_timeout / 2)
        return _fence(topic, fence_timeout, grace, state, world, ours is not None)
    if phase == ExpansionPhase.EXPANDING:  # a direct expansion, or one fenced before partitions existed
        if (world.topic_partitions or 0) < (state.to_partitions or target):
            return Step(
                state,
                Effect.CREATE_PARTITIONS,
                "CreatingPartitions",
                f"creating partitions {world.topic_partitions}..{(state.to_partitions or target) - 1}",
            )
        return _publishing(state, "Publishing", f"publishing epoch {state.epoch}")
    # Publishing: the epoch is not active yet, or we would have completed above.
    return _publishing(state, "Publishing", f"publishing epoch {state.epoch}")


def _publishing(state: ExpansionState, reason: str, message: str) -> Step:
    return Step(_at(state, ExpansionPhase.PUBLISHING), Effect.PUBLISH_EPOCH, reason, message, record=False)


def _at(state: ExpansionState, phase: ExpansionPhase) -> ExpansionState:
    return replace(state, phase=phase, served=False)


def _creating(state: ExpansionState) -> Step:
    return Step(
        state,
        Effect.CREATE_PARTITIONS,
        "CreatingPartitions",
        f"creating partitions {state.from_partitions}..{(state.to_partitions or 1) - 1} and waiting "
        f"until they are served; producers write to the first {state.from_partitions} meanwhile",
    )


def _create_then_fence(topic: str, state: ExpansionState, world: World) -> Step:
    if not state.served:
        return _creating(state)
    live = world.producers
    # silent producers too: a paused murmur2 producer of a mixed topic still has key order to keep
    everyone = [*live.values(), *world.silent.values()]
    if live and all(p.partitioner == "round_robin" for p in everyone):
        return Step(
            replace(_at(state, ExpansionPhase.EXPANDING), direct=True),
            Effect.APPEND_FENCE,
            "NothingToGate",
            f"only round_robin producers write {topic!r}: no key order to keep, expanding without "
            "waiting for producers",
        )
    if world.stragglers:
        # Waited for before the fence, while every producer still writes: only a producer falling
        # silent during the fence then makes the others wait.
        silent = sorted(world.stragglers)
        return Step(
            state,
            None,
            "WaitingForSilentProducers",
            f"{len(silent)} producer(s) of {topic!r} fell silent without closing ({', '.join(silent[:10])}) "
            f"and may still land records queued by the current count: fencing in "
            f"{max(world.stragglers.values()):.1f}s (their session + delivery timeout); producers write on",
            requeue=min(max(world.stragglers.values()), STRAGGLER_POLL_SECONDS),
        )
    return Step(
        _at(state, ExpansionPhase.FENCING),
        Effect.APPEND_FENCE,
        "Fencing",
        f"fencing {len(live)} producer(s) of {topic!r} for epoch {state.epoch}: "
        f"{state.from_partitions} -> {state.to_partitions}",
    )


def _our_epoch(state: ExpansionState, history: EpochHistory | None) -> Epoch | None:
    if history is None or state.epoch is None:
        return None
    return next((e for e in history.epochs if e.epoch == state.epoch), None)


def _exactly_ours(state: ExpansionState, history: EpochHistory | None) -> Epoch | None:
    """This expansion's epoch: its number, and its partition counts too (an epoch of that number
    towards another count was written by someone else, e.g. after this one's status was lost)."""
    ours = _our_epoch(state, history)
    counts = (state.from_partitions, state.to_partitions)
    return ours if ours is not None and (ours.from_partitions, ours.partitions) == counts else None


def _validate(topic: str, target: int, state: ExpansionState, world: World) -> Step:
    if world.topic_partitions is None:
        return _fail(state, "TopicNotFound", f"topic {topic!r} does not exist")
    if target > world.max_partitions:
        return _fail(
            state,
            "TooManyPartitions",
            f"{target} partitions exceed the configured maximum of {world.max_partitions}",
        )
    if world.paused:
        return Step(
            state,
            None,
            PAUSED,
            f"reconciliation paused by the {PAUSE_ANNOTATION} annotation; remove it to go on",
            requeue=PAUSED_POLL_SECONDS,
        )
    if world.other_expansion is not None:
        return Step(
            state,
            None,
            "WaitingForOtherExpansion",
            f"expansion {world.other_expansion} of topic {topic!r} is in flight; this one waits",
            requeue=5.0,
        )
    # a topic ordo never recorded: its producers' count, not partitions added outside ordo since
    counts = {p: v.partitions for p, v in world.producers.items() if v.partitions is not None}
    history = world.history or EpochHistory.initial(topic, first_count(counts, world.topic_partitions))
    if history.fencing:
        return Step(
            state,
            None,
            "WaitingForOtherExpansion",
            f"epoch {history.current.epoch} of topic {topic!r} is still fencing",
            requeue=5.0,
        )
    current = history.active.partitions
    if target <= current:
        return _fail(state, "NotLarger", f"target {target} partitions must be larger than today's {current}")
    # the epoch log holds the whole history in one record; with this epoch's thresholds (at
    # their widest) it must still fit, or the publish would fail after producers were fenced
    grown = history.begin_fence(target).publish({p: _WIDEST_OFFSET for p in range(current)})
    size = len(grown.model_dump_json())
    if size > MAX_CONTROL_RECORD_BYTES:
        return _fail(
            state,
            "HistoryTooLarge",
            f"with this expansion the epoch history of {topic!r} ({len(grown.epochs)} epochs) would "
            f"take {size:,} bytes, over the epoch log's {MAX_CONTROL_RECORD_BYTES:,}: grow the topic "
            "in fewer, larger steps",
        )
    epoch = history.current.epoch + 1
    return _creating(ExpansionState(ExpansionPhase.CREATING, epoch, current, target))


def _fence(
    topic: str, fence_timeout: float, grace: float, state: ExpansionState, world: World, appended: bool
) -> Step:
    if not appended:  # killed between recording Fencing and writing the log
        return Step(state, Effect.APPEND_FENCE, "Fencing", f"fencing producers of {topic!r}")
    epoch = state.epoch or 0
    done = state.fenced_through_kafka
    missing = sorted(
        n for n, p in world.producers.items() if (p.fenced_epoch or -1) < epoch and n not in done
    )
    silent = sorted(world.stragglers)
    # Kafka fences whoever can be fenced so: the silent at once, the live once the grace is over
    fenceable = {
        n: p.transactional_id for n, p in world.silent.items() if p.transactional_id and n not in done
    }
    if world.fencing_seconds >= grace:
        fenceable.update((n, t) for n in missing if (t := world.producers[n].transactional_id) is not None)
    if fenceable:
        named = sorted(fenceable)
        return Step(
            replace(state, fenced_through_kafka=done | set(named)),
            Effect.FENCE_PRODUCERS,
            "FencingThroughKafka",
            f"{len(named)} producer(s) of {topic!r} did not acknowledge epoch {epoch} "
            f"({', '.join(named[:10])}): Kafka fences them (InitProducerId of their transactional "
            "ids: their open transactions are aborted and their writes refused from now on)",
            fence=fenceable,
        )
    if not missing and not silent:
        through = f", {len(done)} of them through Kafka" if done else ""
        fenced = (
            f"all {len(world.producers) + len(done - world.producers.keys())} producer(s) fenced after "
            f"{world.fencing_seconds:.2f}s{through}"
        )
        if (world.topic_partitions or 0) < (state.to_partitions or 0):  # created before the fence, but
            # an expansion recorded by an earlier ordo, which fenced first, may not have them yet
            return Step(_at(state, ExpansionPhase.EXPANDING), Effect.CREATE_PARTITIONS, "Fenced", fenced)
        # in this very pass: the thresholds read and the epoch published (module docstring)
        return _publishing(state, "Fenced", f"{fenced}: publishing epoch {epoch}")
    if not missing and world.fencing_seconds < fence_timeout:
        # A silent producer Kafka cannot fence (fencing=lease) may still land records queued by
        # the old count: read the thresholds once nothing it queued can still be written.
        left = max(world.stragglers.values())
        return Step(
            state,
            None,
            "WaitingForSilentProducers",
            f"all {len(world.producers)} live producer(s) fenced; {len(silent)} producer(s) with "
            f"fencing=lease fell silent without acknowledging ({', '.join(silent[:10])}) and may still "
            f"land records queued before: reading the thresholds in {left:.1f}s (their session + "
            "delivery timeout)",
            requeue=min(left, STRAGGLER_POLL_SECONDS),
        )
    if world.fencing_seconds >= fence_timeout:
        if not missing:
            return Step(
                _at(state, ExpansionPhase.ABORTED),
                Effect.ABORT_EPOCH,
                "FenceTimeout",
                f"{len(silent)} silent producer(s) may still land records queued before epoch {epoch} "
                f"for longer than the fence timeout ({fence_timeout:g}s): {', '.join(silent[:10])}; "
                f"producers resume at {state.from_partitions} partitions",
            )
        return Step(
            _at(state, ExpansionPhase.ABORTED),
            Effect.ABORT_EPOCH,
            "FenceTimeout",
            f"{len(missing)} producer(s) did not acknowledge epoch {epoch} within {fence_timeout:g}s: "
            f"{', '.join(missing[:10])}; producers resume at {state.from_partitions} partitions",
        )
    lease_only = [n for n in missing if world.producers[n].transactional_id is None]
    wait = grace - world.fencing_seconds if len(lease_only) < len(missing) else FENCE_POLL_SECONDS
    return Step(
        state,
        None,
        "Fencing",
        f"waiting for {len(missing)} producer(s): {', '.join(missing[:10])}",
        requeue=min(max(wait, 0.0), FENCE_POLL_SECONDS),
    )


def plan_deletion(topic: str, state: ExpansionState, history: EpochHistory | None) -> Step:
    """What deleting the expansion takes, whatever its phase: its epoch aborted while the epoch
    log has it fencing (producers resume at the old count; partitions it created stay, in no
    epoch, as after a fence timeout), and nothing when it wrote no epoch yet or its epoch is
    published (past the point of no return: the expansion stands) or aborted already. The step's
    state is what the expansion became; its message says so, for an Event."""
    phase = state.phase
    ours = _exactly_ours(state, history)
    if phase in TERMINAL and not (ours is not None and ours.state == EpochState.FENCING):
        return Step(state, None, "Deleted", f"deleted after it ended {phase.value}: nothing to undo")
    # an Aborted expansion whose epoch is still fencing: its operator died between recording the
    # abort and writing it, and no daemon drives an ended expansion; the delete writes it
    where = f"deleted while {phase.value}"
    created = (
        f"; partitions {state.from_partitions}..{state.to_partitions - 1}, if created, stay in no epoch "
        "(a later expansion to that count or more takes them)"
        if state.from_partitions is not None and state.to_partitions is not None
        else ""
    )
    if ours is None:
        return Step(
            _at(state, ExpansionPhase.ABORTED),
            None,
            "DeletedInFlight",
            f"{where}: nothing was fenced{created}",
        )
    if ours.state == EpochState.FENCING:
        return Step(
            _at(state, ExpansionPhase.ABORTED),
            Effect.ABORT_EPOCH,
            "DeletedInFlight",
            f"{where}: epoch {ours.epoch} aborted, producers of {topic!r} resume at "
            f"{ours.from_partitions} partitions{created}",
        )
    if ours.state == EpochState.ACTIVE:
        return Step(
            _at(state, ExpansionPhase.COMPLETED),
            None,
            "DeletedInFlight",
            f"{where}: epoch {ours.epoch} was already published, so the expansion stands: "
            f"{topic!r} has {ours.partitions} partitions",
        )
    return Step(
        _at(state, ExpansionPhase.ABORTED),
        None,
        "DeletedInFlight",
        f"{where}: epoch {ours.epoch} was aborted already",
    )


def next_history(
    effect: Effect, topic: str, history: EpochHistory | None, state: ExpansionState
) -> EpochHistory:
    """The epoch log entry after a log effect; applying it twice gives the same entry. Each
    effect acts on this expansion's own epoch alone: one of the same number with other partition
    counts (written by someone else) or an aborted one (by the fence timeout, a deletion, the
    orphan-fence sweep or by hand) raises ``EpochError``, so a pass planned on an older view of
    the log never publishes, with its thresholds, whatever epoch is fencing now."""
    assert state.epoch is not None and state.from_partitions is not None and state.to_partitions is not None
    base = history or EpochHistory.initial(topic, state.from_partitions)
    ours = _our_epoch(state, base)
    if ours is not None and ours != _exactly_ours(state, base):
        raise EpochError(
            f"{topic}: epoch {ours.epoch} in the log goes {ours.from_partitions} -> {ours.partitions}, "
            f"not {state.from_partitions} -> {state.to_partitions}: it is not this expansion's"
        )
    if effect == Effect.APPEND_FENCE:
        if ours is not None:
            return base
        fenced = base.begin_fence(state.to_partitions)
        if fenced.current.epoch != state.epoch:
            raise EpochError(f"{topic}: epoch log is at {base.current.epoch}, expected {state.epoch - 1}")
        return fenced
    if effect == Effect.ABORT_EPOCH:
        return base.abort() if ours is not None and ours.state == EpochState.FENCING else base
    if effect == Effect.PUBLISH_EPOCH:
        if ours is not None and ours.state == EpochState.ACTIVE:
            return base
        if ours is not None and ours.state == EpochState.ABORTED:
            raise EpochError(f"{topic}: epoch {ours.epoch} was aborted: it is never published")
        if ours is None:  # a round-robin-only topic's direct expansion, its fence write lost
            base = next_history(Effect.APPEND_FENCE, topic, base, state)
        return base.publish(dict(state.thresholds or {}))
    raise ValueError(f"{effect} does not write the epoch log")


@dataclass(frozen=True)
class InSync:
    """The PartitionsInSync condition of a completed expansion."""

    status: bool
    reason: str
    message: str


def partitions_in_sync(
    topic: str,
    epoch: int | None,
    topic_partitions: int | None,
    history: EpochHistory | None,
    expanding: bool = False,
) -> InSync | None:
    """Whether the topic still has the partitions its epoch history knows, judged by the
    expansion that made epoch ``epoch`` (a later one judges once there is one); None when there is
    nothing to judge, e.g. while another expansion of the topic is in flight (``expanding``, or its
    epoch fencing): its partitions exist before it publishes."""
    if history is None or epoch is None or topic_partitions is None or history.fencing or expanding:
        return None
    if history.active.epoch > epoch:
        return InSync(
            True, "Superseded", f"epoch {history.active.epoch} of a later expansion covers {topic!r} now"
        )
    if history.active.epoch != epoch:
        return None
    known = history.active.partitions
    if topic_partitions <= known:
        return InSync(True, "InSync", f"{topic!r} has the {known} partitions of epoch {epoch}")
    return InSync(False, "PartitionsAddedOutsideOrdo", added_outside(topic, known, topic_partitions, epoch))
