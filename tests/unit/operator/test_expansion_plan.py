from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ordo.api import ExpansionPhase as P
from ordo.epochs import EpochError, EpochHistory, EpochState
from ordo_operator.plans.expansion import (
    Effect,
    ExpansionState,
    InSync,
    ProducerView,
    Step,
    World,
    next_history,
    partitions_in_sync,
    plan_deletion,
    plan_expansion,
)

T = "orders"


def _fencing_history() -> EpochHistory:
    return EpochHistory.initial(T, 4).begin_fence(8)


CREATING = ExpansionState(P.CREATING, 1, 4, 8)
SERVED = replace(CREATING, served=True)
FENCING = ExpansionState(P.FENCING, 1, 4, 8)
EXPANDING = replace(FENCING, phase=P.EXPANDING)
WITH_THRESHOLDS = replace(EXPANDING, thresholds={p: 10 for p in range(4)})
PUBLISHING = replace(WITH_THRESHOLDS, phase=P.PUBLISHING)
acked = {"p1": ProducerView(fenced_epoch=1)}
not_acked = {"p1": ProducerView(fenced_epoch=None), "p2": ProducerView(fenced_epoch=1)}
published = _fencing_history().publish({p: 10 for p in range(4)})

# (state, world, fence timeout) -> (phase recorded, effect, reason)
TABLE = [
    (
        "pending, ok",
        ExpansionState(),
        World(4, None, acked),
        (P.CREATING, Effect.CREATE_PARTITIONS, "CreatingPartitions"),
    ),
    ("pending, no topic", ExpansionState(), World(None, None), (P.FAILED, None, "TopicNotFound")),
    ("pending, not larger", ExpansionState(), World(8, None), (P.FAILED, None, "NotLarger")),
    ("pending, smaller", ExpansionState(), World(12, None), (P.FAILED, None, "NotLarger")),
    (
        "pending, too many",
        ExpansionState(),
        World(4, None, max_partitions=6),
        (P.FAILED, None, "TooManyPartitions"),
    ),
    (
        "pending, paused",
        ExpansionState(),
        World(4, None, acked, paused=True),
        (P.PENDING, None, "ReconciliationPaused"),
    ),
    (
        "fencing, paused: goes on (a pause must not hold producers fenced)",
        FENCING,
        World(8, _fencing_history(), acked, paused=True),
        (P.PUBLISHING, Effect.PUBLISH_EPOCH, "Fenced"),
    ),
    (
        "pending, another in flight",
        ExpansionState(),
        World(4, None, other_expansion="x"),
        (P.PENDING, None, "WaitingForOtherExpansion"),
    ),
    (
        "pending, log still fencing",
        ExpansionState(),
        World(4, EpochHistory.initial(T, 4).begin_fence(6)),
        (P.PENDING, None, "WaitingForOtherExpansion"),
    ),
    (
        "pending, round robin only",
        ExpansionState(),
        World(4, None, {"r": ProducerView(partitioner="round_robin")}),
        (P.CREATING, Effect.CREATE_PARTITIONS, "CreatingPartitions"),
    ),
    (
        "creating, not served yet",
        CREATING,
        World(8, None, acked),
        (P.CREATING, Effect.CREATE_PARTITIONS, "CreatingPartitions"),
    ),
    ("creating, served", SERVED, World(8, None, acked), (P.FENCING, Effect.APPEND_FENCE, "Fencing")),
    (
        "creating, served, a producer fell silent: wait before fencing",
        SERVED,
        World(8, None, acked, stragglers={"gone": 20.0}),
        (P.CREATING, None, "WaitingForSilentProducers"),
    ),
    (
        "creating, served, round robin only",
        SERVED,
        World(8, None, {"r": ProducerView(partitioner="round_robin")}),
        (P.EXPANDING, Effect.APPEND_FENCE, "NothingToGate"),
    ),
    (
        "creating, served, no producers at all",
        SERVED,
        World(8, None),
        (P.FENCING, Effect.APPEND_FENCE, "Fencing"),
    ),
    ("fencing, log not written", FENCING, World(4, None, acked), (P.FENCING, Effect.APPEND_FENCE, "Fencing")),
    (
        "fencing, all acked",
        FENCING,
        World(8, _fencing_history(), acked),
        (P.PUBLISHING, Effect.PUBLISH_EPOCH, "Fenced"),
    ),  # in the same pass, status written after (test_the_publish_follows_the_last_acknowledgement...)
    (
        "fencing, all acked, partitions missing (fenced by an earlier ordo before creating)",
        FENCING,
        World(4, _fencing_history(), acked),
        (P.EXPANDING, Effect.CREATE_PARTITIONS, "Fenced"),
    ),
    ("fencing, waiting", FENCING, World(4, _fencing_history(), not_acked), (P.FENCING, None, "Fencing")),
    (
        "fencing, timed out",
        FENCING,
        World(4, _fencing_history(), not_acked, fencing_seconds=60),
        (P.ABORTED, Effect.ABORT_EPOCH, "FenceTimeout"),
    ),
    (
        "fencing, all live acked, one silent producer may still land records",
        FENCING,
        World(4, _fencing_history(), acked, stragglers={"gone": 12.5}),
        (P.FENCING, None, "WaitingForSilentProducers"),
    ),
    (
        "fencing, a silent producer outlasts the fence timeout",
        FENCING,
        World(4, _fencing_history(), acked, fencing_seconds=60, stragglers={"gone": 12.5}),
        (P.ABORTED, Effect.ABORT_EPOCH, "FenceTimeout"),
    ),
    (
        "fencing, live producers first",
        FENCING,
        World(4, _fencing_history(), not_acked, stragglers={"gone": 12.5}),
        (P.FENCING, None, "Fencing"),
    ),
    (
        "fencing, already aborted in log",
        FENCING,
        World(4, _fencing_history().abort(), not_acked),
        (P.ABORTED, None, "FenceTimeout"),
    ),
    (
        "expanding, no thresholds (direct, or an earlier ordo's)",
        EXPANDING,
        World(8, _fencing_history(), acked),
        (P.PUBLISHING, Effect.PUBLISH_EPOCH, "Publishing"),
    ),
    (
        "expanding, partitions missing",
        WITH_THRESHOLDS,
        World(4, _fencing_history(), acked),
        (P.EXPANDING, Effect.CREATE_PARTITIONS, "CreatingPartitions"),
    ),  # an expansion begun by an operator that fenced before creating
    (
        "expanding, partitions created",
        WITH_THRESHOLDS,
        World(8, _fencing_history(), acked),
        (P.PUBLISHING, Effect.PUBLISH_EPOCH, "Publishing"),
    ),
    (
        "publishing, not yet",
        PUBLISHING,
        World(8, _fencing_history()),
        (P.PUBLISHING, Effect.PUBLISH_EPOCH, "Publishing"),
    ),
    ("publishing, done", PUBLISHING, World(8, published), (P.COMPLETED, None, "Completed")),
    ("expanding, already published", WITH_THRESHOLDS, World(8, published), (P.COMPLETED, None, "Completed")),
    ("fencing, already published", FENCING, World(8, published), (P.COMPLETED, None, "Completed")),
    (
        "completed",
        replace(PUBLISHING, phase=P.COMPLETED),
        World(8, published),
        (P.COMPLETED, None, "Completed"),
    ),
    ("failed stays failed", ExpansionState(P.FAILED), World(4, None), (P.FAILED, None, "Failed")),
    (
        "aborted stays aborted",
        replace(FENCING, phase=P.ABORTED),
        World(4, None),
        (P.ABORTED, None, "Aborted"),
    ),
]


@pytest.mark.parametrize(("state", "world", "expected"), [t[1:] for t in TABLE], ids=[t[0] for t in TABLE])
def test_transition_table(
    state: ExpansionState, world: World, expected: tuple[P, Effect | None, str]
) -> None:
    step = plan_expansion(T, 8, 60, state, world)
    assert (step.state.phase, step.effect, step.reason) == expected
    assert step.message or step.terminal


def test_failed_validation_says_what_to_fix() -> None:
    step = plan_expansion(T, 8, 60, ExpansionState(), World(8, None))
    assert step.message == "target 8 partitions must be larger than today's 8"
    timeout = plan_expansion(T, 8, 5, FENCING, World(4, _fencing_history(), not_acked, fencing_seconds=5))
    assert "1 producer(s) did not acknowledge epoch 1 within 5s: p1" in timeout.message


def test_log_effects_are_idempotent() -> None:
    once = next_history(Effect.APPEND_FENCE, T, None, FENCING)
    assert next_history(Effect.APPEND_FENCE, T, once, FENCING) == once
    done = next_history(Effect.PUBLISH_EPOCH, T, once, PUBLISHING)
    assert next_history(Effect.PUBLISH_EPOCH, T, done, PUBLISHING) == done
    assert done.active.partitions == 8 and done.active.thresholds == {p: 10 for p in range(4)}
    aborted = next_history(Effect.ABORT_EPOCH, T, once, FENCING)
    assert next_history(Effect.ABORT_EPOCH, T, aborted, FENCING) == aborted
    assert aborted.active.partitions == 4


def test_an_aborted_epoch_is_never_published_nor_another_one_in_its_place() -> None:
    """A pass planned Publishing on an older view of the log, while the epoch was aborted (fence
    timeout, deletion, the orphan-fence sweep, by hand) and the next expansion began fencing
    epoch 2: it used to publish epoch 2 with epoch 1's thresholds."""
    ours_aborted = _fencing_history().abort()
    next_fencing = ours_aborted.begin_fence(6)
    for history in (ours_aborted, next_fencing):
        with pytest.raises(EpochError, match="epoch 1 was aborted"):
            next_history(Effect.PUBLISH_EPOCH, T, history, PUBLISHING)
    assert next_history(Effect.ABORT_EPOCH, T, next_fencing, FENCING) == next_fencing, "epoch 2 untouched"


def test_an_epoch_of_the_same_number_towards_another_count_is_not_this_expansions() -> None:
    """Epoch 1 in the log goes 4 -> 6 (another writer's) while this expansion recorded 1 as 4 -> 8:
    it neither publishes, fences nor aborts it, and deleting it undoes nothing."""
    theirs = EpochHistory.initial(T, 4).begin_fence(6)
    for effect, state in [
        (Effect.PUBLISH_EPOCH, PUBLISHING),
        (Effect.APPEND_FENCE, FENCING),
        (Effect.ABORT_EPOCH, FENCING),
    ]:
        with pytest.raises(EpochError, match="not 4 -> 8: it is not this expansion's"):
            next_history(effect, T, theirs, state)
    step = plan_deletion(T, PUBLISHING, theirs)
    assert step.effect is None and "nothing was fenced" in step.message


# --- Crash-resume: an operator killed before or after any record or effect still completes --------


class Crash(Exception):
    pass


@dataclass
class Sim:
    """Kafka, the epoch log and producers, as the operator's shell would see them."""

    partitions: int = 4
    ends: list[int] = field(default_factory=lambda: [5, 0, 7, 3])
    log: EpochHistory | None = None
    producers: dict[str, ProducerView] = field(
        default_factory=lambda: {"a": ProducerView(), "b": ProducerView()}
    )
    stubborn: set[str] = field(default_factory=set)
    clock: float = 0.0
    created_calls: int = 0
    acked_ends: list[int] = field(default_factory=list)
    """The old partitions' ends when the last producer acknowledged."""
    writes_after_ack: int = 0
    """Status writes between the last acknowledgement and the publish."""

    def world(self) -> World:
        if self.log is not None and self.log.fencing:  # cooperative producers acknowledge the fence
            for name in self.producers:
                if name not in self.stubborn:
                    self.producers[name] = ProducerView(fenced_epoch=self.log.current.epoch)
            if not self.stubborn:  # every one acknowledged: staying keys' records go on landing
                self.acked_ends = self.acked_ends or list(self.ends[:4])
                self.ends[:4] = [end + 1 for end in self.ends[:4]]
        return World(self.partitions, self.log, dict(self.producers), fencing_seconds=self.clock)

    def apply(self, step: Step) -> ExpansionState:
        state = step.state
        if step.effect == Effect.PUBLISH_EPOCH and state.thresholds is None:  # the shell reads them
            state = replace(state, thresholds=dict(enumerate(self.ends[: state.from_partitions])))
        if step.effect in (Effect.APPEND_FENCE, Effect.ABORT_EPOCH, Effect.PUBLISH_EPOCH):
            self.log = next_history(step.effect, T, self.log, state)
        elif step.effect == Effect.CREATE_PARTITIONS:
            assert state.to_partitions is not None
            self.created_calls += 1
            self.ends += [0] * (state.to_partitions - self.partitions)
            self.partitions = max(self.partitions, state.to_partitions)
            return replace(state, served=True)
        return state


def run_operator(
    sim: Sim, status: ExpansionState, crash_at: int | None, timeout: float = 60
) -> ExpansionState:
    """Runs until terminal; raises Crash at the `crash_at`-th record/effect. Returns the status."""
    events = 0

    def tick() -> None:
        nonlocal events
        events += 1
        if crash_at is not None and events == crash_at:
            raise Crash

    holder = [status]
    try:
        for _ in range(100):
            step = plan_expansion(T, 8, timeout, holder[0], sim.world())
            if step.record:
                tick()
                holder[0] = step.state  # recorded in status before the effect
                published = sim.log is not None and not sim.log.fencing
                sim.writes_after_ack += bool(sim.acked_ends) and not published
            if step.terminal and step.effect is None:
                return holder[0]
            tick()
            applied = sim.apply(step)  # a publish is recorded by the next pass, Completed
            holder[0] = applied if step.record else holder[0]
            sim.clock += step.requeue or 0
    except Crash:
        pass
    return holder[0]


@pytest.mark.parametrize("crash_at", [None, *range(1, 9)])  # a run has 7 records and effects
def test_operator_killed_at_any_point_resumes_and_completes(crash_at: int | None) -> None:
    sim = Sim()
    status = run_operator(sim, ExpansionState(), crash_at)
    status = run_operator(sim, status, None)  # the restarted operator
    assert status.phase == P.COMPLETED
    assert sim.partitions == 8 and sim.log is not None
    assert [e.epoch for e in sim.log.epochs] == [0, 1], "exactly one epoch appended"
    # read after every acknowledgement (by the restarted operator, if killed before the publish)
    thresholds = sim.log.active.thresholds
    assert all(thresholds[p] >= end for p, end in enumerate(sim.acked_ends)), (thresholds, sim.acked_ends)
    assert status.thresholds == thresholds, "status shows what the log published"
    assert sim.created_calls <= 2


def test_the_publish_follows_the_last_acknowledgement_with_no_status_write_between() -> None:
    sim = Sim()
    status = run_operator(sim, ExpansionState(), None)
    assert status.phase == P.COMPLETED and sim.acked_ends and sim.writes_after_ack == 0
    step = plan_expansion(T, 8, 60, FENCING, World(8, _fencing_history(), acked))
    assert (step.effect, step.record, step.state.thresholds) == (Effect.PUBLISH_EPOCH, False, None)


@given(st.lists(st.integers(1, 12), min_size=1, max_size=4))
def test_repeated_crashes_never_corrupt_the_log(crashes: list[int]) -> None:
    sim = Sim()
    status = ExpansionState()
    for crash_at in crashes:
        status = run_operator(sim, status, crash_at)
    status = run_operator(sim, status, None)
    assert status.phase == P.COMPLETED and sim.log is not None and sim.log.active.partitions == 8


def test_a_producer_that_never_acknowledges_aborts_the_expansion_and_producers_keep_the_old_count() -> None:
    sim = Sim(stubborn={"b"})
    status = run_operator(sim, ExpansionState(), None, timeout=2)
    assert status.phase == P.ABORTED
    assert (
        sim.log is not None and sim.log.current.state == EpochState.ABORTED and sim.log.active.partitions == 4
    )
    # the partitions were created before the fence (Kafka cannot remove them): no epoch uses them,
    # and a later expansion to 8 takes them as they are
    assert sim.partitions == 8 and sim.created_calls == 1
    sim.stubborn.clear()
    again = run_operator(sim, ExpansionState(), None)
    assert again.phase == P.COMPLETED and again.epoch == 2 and sim.log.active.partitions == 8
    assert sim.created_calls == 2  # the second one only waits until they are served


def test_partitions_added_outside_ordo_are_reported_by_the_expansion_of_the_current_epoch() -> None:
    grown = EpochHistory.initial("t", 2).begin_fence(4).publish({0: 5, 1: 5})
    in_sync = InSync(True, "InSync", "'t' has the 4 partitions of epoch 1")
    assert partitions_in_sync("t", 1, 4, grown) == in_sync
    drifted = partitions_in_sync("t", 1, 6, grown)
    assert drifted is not None and not drifted.status and drifted.reason == "PartitionsAddedOutsideOrdo"
    assert "partitions 4..5 were added outside ordo" in drifted.message
    assert "to 6 or more" in drifted.message
    # a later expansion judges: the earlier one says so; while one fences, nobody judges
    again = grown.begin_fence(6)
    assert partitions_in_sync("t", 1, 6, again) is None
    assert partitions_in_sync("t", 1, 6, grown, expanding=True) is None  # created before the fence
    superseded = partitions_in_sync("t", 1, 6, again.publish({p: 5 for p in range(4)}))
    assert superseded is not None and superseded.status and superseded.reason == "Superseded"
    assert partitions_in_sync("t", None, 6, grown) is None and partitions_in_sync("t", 1, None, grown) is None


def test_an_expansion_whose_history_would_outgrow_the_epoch_log_is_refused_up_front() -> None:
    history = EpochHistory.initial(T, 10_000)
    for _ in range(40):
        count = history.active.partitions
        history = history.begin_fence(count + 1).publish({p: 10**12 for p in range(count)})
    step = plan_expansion(T, history.active.partitions + 1, 60, ExpansionState(), World(10_040, history))
    assert (step.state.phase, step.effect, step.reason) == (P.FAILED, None, "HistoryTooLarge")
    assert "grow the topic in fewer, larger steps" in step.message


@pytest.mark.parametrize(
    ("state", "history", "expected"),
    [
        (ExpansionState(), None, (P.ABORTED, None, "deleted while Pending: nothing was fenced")),
        (CREATING, None, (P.ABORTED, None, "deleted while Creating: nothing was fenced; partitions 4..7")),
        (
            FENCING,
            None,
            (P.ABORTED, None, "deleted while Fencing: nothing was fenced"),
        ),  # killed before the log
        (
            FENCING,
            _fencing_history(),
            (P.ABORTED, Effect.ABORT_EPOCH, "epoch 1 aborted, producers of 'orders' resume at 4"),
        ),
        (
            WITH_THRESHOLDS,
            _fencing_history(),
            (P.ABORTED, Effect.ABORT_EPOCH, "deleted while Expanding: epoch 1 aborted"),
        ),
        (
            PUBLISHING,
            _fencing_history(),
            (P.ABORTED, Effect.ABORT_EPOCH, "deleted while Publishing: epoch 1 aborted"),
        ),
        (
            PUBLISHING,
            published,
            (P.COMPLETED, None, "epoch 1 was already published, so the expansion stands"),
        ),
        (FENCING, _fencing_history().abort(), (P.ABORTED, None, "epoch 1 was aborted already")),
        (replace(PUBLISHING, phase=P.COMPLETED), published, (P.COMPLETED, None, "nothing to undo")),
    ],
)
def test_deleting_an_expansion_aborts_its_epoch_only_while_it_is_fencing(
    state: ExpansionState, history: EpochHistory | None, expected: tuple[P, Effect | None, str]
) -> None:
    step = plan_deletion(T, state, history)
    phase, effect, words = expected
    assert (step.state.phase, step.effect) == (phase, effect) and words in step.message, step
    if step.effect is not None:  # what the shell writes: the epoch aborted, producers back at 4
        after = next_history(step.effect, T, history, step.state)
        assert after.current.state == EpochState.ABORTED and after.active.partitions == 4
        assert next_history(step.effect, T, after, step.state) == after, (
            "an operator killed mid-delete repeats it"
        )


# -- fencing through Kafka (issue 42): producers with a transactional id are fenced, not waited out

TX = "ordo-producer.p1"
live_tx_not_acked = {
    "p1": ProducerView(fenced_epoch=None, transactional_id=TX),
    "p2": ProducerView(fenced_epoch=1),
}


def test_a_silent_producer_kafka_can_fence_is_not_waited_for_before_the_fence() -> None:
    silent = {"gone": ProducerView(transactional_id="ordo-producer.gone")}
    step = plan_expansion(T, 8, 60, SERVED, World(8, None, acked, silent=silent))
    assert (step.state.phase, step.effect) == (P.FENCING, Effect.APPEND_FENCE)


def test_a_silent_producer_is_fenced_through_kafka_at_once_once_the_fence_is_written() -> None:
    silent = {"gone": ProducerView(transactional_id="ordo-producer.gone")}
    step = plan_expansion(T, 8, 60, FENCING, World(8, _fencing_history(), acked, silent=silent))
    assert step.effect == Effect.FENCE_PRODUCERS and step.reason == "FencingThroughKafka"
    assert step.fence == {"gone": "ordo-producer.gone"}
    assert step.state.phase == P.FENCING and step.state.fenced_through_kafka == {"gone"}
    after = plan_expansion(T, 8, 60, step.state, World(8, _fencing_history(), acked, silent=silent))
    assert (after.state.phase, after.effect) == (P.PUBLISHING, Effect.PUBLISH_EPOCH), "fenced counts as done"


def test_a_live_producer_that_does_not_acknowledge_is_fenced_through_kafka_after_the_grace() -> None:
    waiting = plan_expansion(
        T, 8, 60, FENCING, World(8, _fencing_history(), live_tx_not_acked, fencing_seconds=1.0)
    )
    assert waiting.effect is None and waiting.reason == "Fencing" and waiting.requeue is not None
    assert waiting.requeue <= 1.0
    due = plan_expansion(
        T, 8, 60, FENCING, World(8, _fencing_history(), live_tx_not_acked, fencing_seconds=2.0)
    )
    assert due.effect == Effect.FENCE_PRODUCERS and due.fence == {"p1": TX}
    fenced = plan_expansion(
        T, 8, 60, due.state, World(8, _fencing_history(), live_tx_not_acked, fencing_seconds=2.5)
    )
    assert fenced.effect == Effect.PUBLISH_EPOCH


def test_the_grace_is_at_most_half_the_fence_timeout() -> None:
    world = World(8, _fencing_history(), live_tx_not_acked, fencing_seconds=1.5)
    assert plan_expansion(T, 8, 3, FENCING, world, fence_grace=30).effect == Effect.FENCE_PRODUCERS


def test_a_producer_kafka_cannot_fence_is_waited_for_until_the_timeout_as_before() -> None:
    world = World(8, _fencing_history(), not_acked, fencing_seconds=30)
    assert plan_expansion(T, 8, 60, FENCING, world).reason == "Fencing"
    late = replace(world, fencing_seconds=60)
    assert plan_expansion(T, 8, 60, FENCING, late).effect == Effect.ABORT_EPOCH


def test_a_paused_murmur2_producer_keeps_a_mixed_topic_from_the_round_robin_shortcut() -> None:
    live = {"r": ProducerView(partitioner="round_robin")}
    silent = {"m": ProducerView(partitioner="murmur2", transactional_id="ordo-producer.m")}
    mixed = plan_expansion(T, 8, 60, SERVED, World(8, None, live, silent=silent))
    assert mixed.reason == "Fencing", "a key order to keep: fenced, not expanded directly"
    only_round_robin = plan_expansion(T, 8, 60, SERVED, World(8, None, live))
    assert only_round_robin.reason == "NothingToGate"
