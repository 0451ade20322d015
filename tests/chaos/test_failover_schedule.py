"""The replicated chaos schedule is pure: the same seed gives the same rounds, and every schedule
kills each role at least once and kills through at least two expansions that grow the topic."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .failover_schedule import FailoverLimits, Target, make_rounds


def test_the_same_seed_gives_the_same_rounds_and_another_seed_others() -> None:
    assert make_rounds(7, 12) == make_rounds(7, 12)
    assert make_rounds(7, 12) != make_rounds(8, 12)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32), rounds=st.sampled_from([5, 6, 12, 40]))
def test_every_schedule_kills_each_role_and_kills_through_expansions(seed: int, rounds: int) -> None:
    limits = FailoverLimits()
    schedule = make_rounds(seed, rounds, limits)
    assert len(schedule) == rounds
    assert {r.target for r in schedule[: len(Target)]} == set(Target)
    growing = [r.expand_to for r in schedule if r.expand_to]
    assert len(growing) >= 2
    assert growing == sorted(set(growing)) and growing[0] > limits.partitions
    assert growing[-1] <= limits.max_partitions
    assert any(r.expand_to for r in schedule if r.target == Target.EPOCH_LOG_LEADER)
    assert all(limits.min_down <= r.down <= limits.max_down for r in schedule)
    assert all(0 <= r.lead <= limits.max_lead and (r.expand_to or not r.lead) for r in schedule)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32), rounds=st.integers(1, len(Target) - 1))
def test_a_short_run_kills_distinct_roles_each_through_an_expansion(seed: int, rounds: int) -> None:
    """make test's one round (and any run too short for every role): which roles it kills varies
    with the seed, and every kill runs through an expansion that grows the topic."""
    limits = FailoverLimits()
    schedule = make_rounds(seed, rounds, limits)
    assert len(schedule) == rounds
    assert len({r.target for r in schedule}) == rounds
    growing = [r.expand_to for r in schedule]
    assert all(growing) and growing == sorted(set(growing)) and growing[0] > limits.partitions


def test_a_short_run_kills_the_first_roles_of_its_seeds_order() -> None:
    assert [r.target for r in make_rounds(7, 2)] == [r.target for r in make_rounds(7, 5)][:2]


def test_a_run_without_rounds_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one round"):
        make_rounds(1, 0)
