"""A member's reaction to an assignment (``plan_assignment``), by property: whatever it holds and
whatever comes, it hands back exactly what it may no longer produce, takes exactly what it lacks
and acknowledges what it was given. And to a unit whose producer failed (``plan_retake``): it
takes the partition back unless a newer owner has it, after a wait that grows and is capped."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ordo.group.plan import (
    RETAKE_FIRST_SECONDS,
    RETAKE_MAX_SECONDS,
    UnitFailure,
    plan_assignment,
    plan_retake,
    retake_delay,
)
from ordo.group.transaction import UNIT_HEADROOM_SECONDS, unit_transaction_timeout_ms
from ordo.member_wire import GroupSettings, MemberAssignment

DEFAULT = GroupSettings(session_timeout_seconds=30, exactly_once=True, checkpoint_topic="__ordo_checkpoints")
partitions = st.frozensets(st.integers(0, 15), max_size=16)
settings = st.builds(
    GroupSettings,
    session_timeout_seconds=st.integers(1, 60),
    exactly_once=st.booleans(),
    checkpoint_topic=st.sampled_from(["__ordo_checkpoints", "other"]),
    max_idle_seconds=st.integers(1, 600),
)
assignments = st.none() | st.builds(
    MemberAssignment,
    group=st.just("g"),
    generation=st.integers(0, 100),
    partitions=partitions.map(lambda ps: tuple(sorted(ps))),
    settings=st.none() | settings,
)


Case = tuple[MemberAssignment | None, frozenset[int], GroupSettings | None, int, bool]
cases = st.tuples(assignments, partitions, st.none() | settings, st.integers(-1, 100), st.booleans())
"""(the assignment, the partitions held, the settings taken last, the generation applied last,
whether the member stepped out for idleness)"""


@given(cases)
def test_the_member_ends_up_holding_exactly_its_target(case: Case) -> None:
    assignment, held, current, generation, stepped_out = case
    plan = plan_assignment(assignment, held, current, DEFAULT, generation, stepped_out)
    kept = held - set(plan.release)
    taken = plan.to_take(kept)
    assert set(plan.release) <= held and list(plan.release) == sorted(plan.release)
    assert not kept & set(taken), "a kept partition is never opened again"
    assert kept | set(taken) == plan.target, "after release and take it holds its target, no more"
    if stepped_out or assignment is None:
        assert plan.target == frozenset() and set(plan.release) == held
    else:
        assert plan.target == frozenset(assignment.partitions)


@given(cases)
def test_a_partition_is_handed_back_only_when_it_leaves_or_the_producers_must_change(case: Case) -> None:
    assignment, held, current, generation, stepped_out = case
    plan = plan_assignment(assignment, held, current, DEFAULT, generation, stepped_out)
    for p in plan.release:
        assert p not in plan.target or plan.restart
    if plan.restart:
        assert current is not None and not plan.settings.same_producers(current)
        assert set(plan.release) == held, "new producers for everything held"
    else:
        assert set(plan.release) == held - plan.target


@given(assignments, st.none() | settings, st.integers(-1, 100))
def test_it_acknowledges_what_it_was_given_under_the_settings_it_was_given(
    assignment: MemberAssignment | None, current: GroupSettings | None, generation: int
) -> None:
    plan = plan_assignment(assignment, frozenset(), current, DEFAULT, generation)
    if assignment is None:
        assert plan.acknowledge is None and plan.generation == generation
        assert plan.settings == (current or DEFAULT), "no assignment changes no setting"
    else:
        assert plan.acknowledge == plan.generation == assignment.generation
        assert plan.settings == (assignment.settings or current or DEFAULT)
    if current is None:
        assert not plan.restart, "a member's first settings restart nothing"


def test_a_partition_dropped_while_releasing_is_taken_again_if_still_assigned() -> None:
    assignment = MemberAssignment(group="g", generation=4, partitions=(0, 1, 2))
    plan = plan_assignment(assignment, {0, 1, 3}, DEFAULT, DEFAULT, 3)
    assert plan.release == (3,)
    assert plan.to_take({0, 1}) == [2]
    assert plan.to_take({0}) == [1, 2], "1 was fenced away meanwhile: the assignment still names it"


# -- a unit whose producer failed: take the partition back, or leave it to the newer owner ------

failures = st.builds(
    UnitFailure,
    exactly_once=st.booleans(),
    assigned=st.booleans(),
    generation=st.integers(0, 100),
    checkpoint_generation=st.none() | st.integers(0, 100),
    failures=st.integers(1, 1000),
)


@given(failures)
def test_only_a_partition_no_newer_owner_has_is_taken_back(failure: UnitFailure) -> None:
    plan = plan_retake(failure)
    newer_owner = not failure.assigned or (
        failure.checkpoint_generation is not None and failure.checkpoint_generation > failure.generation
    )
    assert plan.retake == (failure.exactly_once and not newer_owner), plan.why
    if plan.retake:
        assert RETAKE_FIRST_SECONDS <= plan.delay <= RETAKE_MAX_SECONDS
        assert f"{plan.delay:g}s" in plan.why, "the log line says when"
    else:
        assert plan.delay == 0 and plan.why


@given(st.integers(1, 1000))
def test_the_wait_grows_with_failures_in_a_row_and_is_capped(n: int) -> None:
    assert retake_delay(1) == RETAKE_FIRST_SECONDS, "the first attempt after a second"
    assert retake_delay(n) <= retake_delay(n + 1) <= RETAKE_MAX_SECONDS
    assert retake_delay(n + 1) == min(RETAKE_MAX_SECONDS, 2 * retake_delay(n)), "doubling up to the cap"


def test_the_cases_the_member_meets() -> None:
    def plan(**facts: object) -> tuple[bool, float]:
        base: dict[str, object] = {
            "exactly_once": True,
            "assigned": True,
            "generation": 7,
            "checkpoint_generation": 7,
            "failures": 1,
        }
        decided = plan_retake(UnitFailure(**{**base, **facts}))  # type: ignore[arg-type]
        return decided.retake, decided.delay

    # the coordinator timed the transaction out, or the operator fenced a silent unit: the
    # member's own checkpoint (or one of an older owner's) is the last, the assignment names it
    assert plan() == (True, 1.0)
    assert plan(checkpoint_generation=None) == (True, 1.0), "nothing committed yet"
    assert plan(checkpoint_generation=3) == (True, 1.0), "an older owner's checkpoint"
    assert plan(failures=3) == (True, 4.0)
    # a newer owner: the member's assignment moved on, or the new owner already committed
    assert plan(assigned=False) == (False, 0.0)
    assert plan(checkpoint_generation=8) == (False, 0.0)
    assert plan(exactly_once=False) == (False, 0.0), "at-least-once: no partition's own producer"


def test_a_units_transaction_outlasts_a_fence_and_the_delivery_timeout() -> None:
    """produce() may wait ``block_timeout`` in a fence and its records then take up to the
    delivery timeout: the coordinator must not abort the unit for that (it took 60 s, Kafka's
    default, while a fence alone may take 60 s)."""
    assert unit_transaction_timeout_ms({}, 60.0, 30_000) == 120_000
    assert unit_transaction_timeout_ms({}, 10.0, 300_000) == 340_000
    for block, delivery in [(60.0, 30_000), (1.0, 1_000), (300.0, 120_000)]:
        timeout = unit_transaction_timeout_ms({}, block, delivery)
        assert timeout >= block * 1000 + delivery + UNIT_HEADROOM_SECONDS * 1000
    assert unit_transaction_timeout_ms({"transaction.timeout.ms": 2000}, 60.0, 30_000) == 2000, (
        "the application's own setting stands"
    )
