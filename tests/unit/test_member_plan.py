"""A member's reaction to an assignment (``plan_assignment``), by property: whatever it holds and
whatever comes, it hands back exactly what it may no longer produce, takes exactly what it lacks
and acknowledges what it was given."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ordo.group.plan import plan_assignment
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
