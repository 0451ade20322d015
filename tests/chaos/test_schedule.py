"""The chaos schedule generator is pure: the same seed gives the same run, and every run holds
what the soak promises (expansions, a restart mid-expansion, every kind of fault, bounded members)."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .schedule import FAULTS, Kind, Limits, make_schedule, members_over_time

CI_SECONDS = 75.0


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    assert make_schedule(7, CI_SECONDS) == make_schedule(7, CI_SECONDS)
    assert [a.describe() for a in make_schedule(7, CI_SECONDS)] == [
        a.describe() for a in make_schedule(7, CI_SECONDS)
    ]
    assert [a.describe() for a in make_schedule(7, CI_SECONDS)] != [
        a.describe() for a in make_schedule(8, CI_SECONDS)
    ]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), seconds=st.sampled_from([CI_SECONDS, 120.0, 600.0, 1800.0]))
def test_every_schedule_holds_the_soaks_promises(seed: int, seconds: float) -> None:
    limits = Limits()
    actions = make_schedule(seed, seconds, limits)
    assert [a.at for a in actions] == sorted(a.at for a in actions)
    assert all(limits.warmup <= a.at <= seconds - limits.cooldown for a in actions)

    expansions = [a for a in actions if a.kind == Kind.EXPAND]
    assert len(expansions) >= 3
    targets = [a.partitions for a in expansions]
    assert targets == sorted(set(targets)) and targets[0] > limits.partitions
    assert targets[-1] <= limits.max_partitions
    assert all(b.at - a.at >= limits.expansion_gap for a, b in pairwise(expansions))
    first = expansions[0].at
    assert any(a.kind == Kind.RESTART_OPERATOR and first < a.at <= first + 2.5 for a in actions), (
        "the operator is restarted while the first expansion runs"
    )

    assert {a.kind for a in actions} == set(Kind) - {Kind.DELETE_EXPANSION}, "deletes are the soak's"
    assert {a.fault for a in actions if a.kind == Kind.BROKER_FAULT} == set(FAULTS)
    assert all(limits.min_members <= n <= limits.max_members for n in members_over_time(actions, limits))
    pauses = [a.seconds for a in actions if a.kind in (Kind.PAUSE_MEMBER, Kind.PAUSE_CONSUMER)]
    assert all(0.5 <= s <= limits.max_pause for s in pauses)


def test_a_soak_is_denser_than_the_ci_run() -> None:
    short, long = make_schedule(1, CI_SECONDS), make_schedule(1, 1800.0)
    assert len(long) > 10 * len(short)
    assert len([a for a in long if a.kind == Kind.EXPAND]) > 3


def test_every_fault_is_bounded_and_retriable() -> None:
    for fault in FAULTS:
        assert (fault.count or 0) > 0 or (fault.duration or 0) > 0, fault
        assert sum(x is not None and x is not False for x in (fault.error, fault.delay, fault.drop)) == 1


def test_a_run_too_short_for_three_expansions_is_refused() -> None:
    with pytest.raises(ValueError, match="three expansions"):
        make_schedule(1, 30.0)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), seconds=st.sampled_from([120.0, 600.0, 1800.0]))
def test_a_soak_pauses_past_every_session_and_deletes_expansions_mid_flight(
    seed: int, seconds: float
) -> None:
    limits = Limits.soak()
    actions = make_schedule(seed, seconds, limits)
    assert {a.kind for a in actions} == set(Kind)
    expansions = [a.at for a in actions if a.kind == Kind.EXPAND]
    for delete in (a for a in actions if a.kind == Kind.DELETE_EXPANSION):
        before = [at for at in expansions if at < delete.at]
        assert before and delete.at - before[-1] <= 3.0, "deleted while the last expansion runs"
    pauses = [a.seconds for a in actions if a.kind in (Kind.PAUSE_MEMBER, Kind.PAUSE_CONSUMER)]
    assert all(0.5 <= s <= limits.max_pause for s in pauses)
    if seconds >= 600:
        assert max(pauses) > 10.0, "some pause outlasts the members' producers' session"
