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


def test_a_run_too_short_for_every_role_is_refused() -> None:
    with pytest.raises(ValueError, match="each of the 5 roles"):
        make_rounds(1, 4)
