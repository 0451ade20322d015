"""The TopicAutoscaler's planner driven through simulated time with noisy, bursty and lagging load:
it never flaps, never exceeds its bounds, never runs two expansions, and grows a sustained breach
within the stabilization window plus one measuring interval."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ordo.api import Growth
from ordo.epochs import prior_map
from ordo_operator.plans.autoscale import (
    Decision,
    Load,
    Outcome,
    Policy,
    Situation,
    decide,
    grown_count,
    largest_prior_set,
)

TARGET = 100.0  # records/s per partition


@dataclass
class Run:
    """A topic under an autoscaler: one measurement every ``interval`` seconds; an expansion
    decided takes ``takes`` seconds."""

    policy: Policy
    partitions: int
    interval: int
    takes: int
    samples: list[Load] = field(default_factory=list)
    in_flight: tuple[int, float] | None = None  # target, when it ends
    ended_at: float | None = None
    decisions: list[tuple[float, Decision]] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)

    def step(self, now: float, load: Callable[[float], Load]) -> Decision:
        if self.in_flight is not None and now >= self.in_flight[1]:
            self.partitions, self.in_flight, self.ended_at = self.in_flight[0], None, now
        self.samples.append(load(now))
        situation = Situation(
            now,
            self.partitions,
            self.samples[-200:],
            "x" if self.in_flight else None,
            self.ended_at,
        )
        decision = decide(situation, self.policy)
        if decision.outcome == Outcome.GROW:
            assert self.in_flight is None, "two expansions in flight"
            assert decision.target is not None
            self.in_flight = (decision.target, now + self.takes)
        self.decisions.append((now, decision))
        self.counts.append(self.partitions)
        return decision

    def grows(self) -> list[tuple[float, Decision]]:
        return [(t, d) for t, d in self.decisions if d.outcome == Outcome.GROW]


def _records(interval: int, rate: float, lag: float = 0.0) -> Callable[[float], Load]:
    return lambda now: Load(now - interval, now, rate, rate * 100, {"billing": lag})


def _policy(**changes: object) -> Policy:
    base = Policy(
        min_partitions=2,
        max_partitions=64,
        window=30,
        cooldown=60,
        records_per_partition=TARGET,
        lag_per_partition={"billing": 1000},
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def _check_invariants(run: Run, start: int) -> None:
    for (_, decision), before in zip(run.decisions, [start, *run.counts], strict=False):
        if decision.outcome == Outcome.GROW:
            assert decision.target is not None
            assert before < decision.target <= run.policy.max_partitions
    assert run.counts == sorted(run.counts), "the partition count went down"
    assert max(run.counts) <= run.policy.max_partitions


intervals = st.integers(min_value=1, max_value=5)
windows = st.integers(min_value=1, max_value=12)  # in intervals


@settings(max_examples=150, deadline=None)
@given(
    interval=intervals,
    window_steps=st.integers(min_value=2, max_value=12),
    partitions=st.sampled_from([2, 4, 8]),
    bursts=st.lists(
        st.tuples(st.integers(min_value=1, max_value=12), st.integers(min_value=1, max_value=6)),
        min_size=1,
        max_size=8,
    ),
    height=st.floats(min_value=1.5, max_value=50),
)
def test_bursts_shorter_than_the_window_never_grow(
    interval: int, window_steps: int, partitions: int, bursts: list[tuple[int, int]], height: float
) -> None:
    policy = _policy(window=window_steps * interval)
    run = Run(policy, partitions, interval, takes=interval)
    calm, high = TARGET * partitions * 0.8, TARGET * partitions * height
    now = 0
    for length, gap in bursts:
        for _ in range(min(length, window_steps - 1)):  # each burst shorter than the window
            now += interval
            run.step(now, _records(interval, high))
        for _ in range(gap):
            now += interval
            run.step(now, _records(interval, calm))
    assert not run.grows()
    _check_invariants(run, partitions)


@settings(max_examples=150, deadline=None)
@given(
    interval=intervals,
    window_steps=windows,
    cooldown_steps=st.integers(min_value=0, max_value=20),
    takes_steps=st.integers(min_value=1, max_value=5),
    noise=st.lists(st.floats(min_value=-0.5, max_value=0.5), min_size=20, max_size=120),
)
def test_noise_around_the_target_grows_at_most_once_per_cooldown(
    interval: int, window_steps: int, cooldown_steps: int, takes_steps: int, noise: list[float]
) -> None:
    policy = _policy(window=window_steps * interval, cooldown=cooldown_steps * interval)
    run = Run(policy, 4, interval, takes=takes_steps * interval)
    for step, wobble in enumerate(noise, start=1):
        run.step(step * interval, _records(interval, TARGET * 4 * (1 + wobble)))
    grows = run.grows()
    # one growth doubles the capacity: load around the old target never breaches it again
    assert len(grows) <= 1
    _check_invariants(run, 4)


@settings(max_examples=150, deadline=None)
@given(
    interval=intervals,
    window_steps=windows,
    calm_steps=st.integers(min_value=0, max_value=30),
    factor=st.floats(min_value=1.05, max_value=40),
    growth=st.sampled_from(list(Growth)),
    by_lag=st.booleans(),
)
def test_a_sustained_breach_grows_within_window_and_one_interval(
    interval: int, window_steps: int, calm_steps: int, factor: float, growth: Growth, by_lag: bool
) -> None:
    window = window_steps * interval
    policy = _policy(window=window, growth=growth)
    run = Run(policy, 4, interval, takes=interval)
    calm = _records(interval, TARGET * 2, lag=500)
    for step in range(1, calm_steps + 1):
        run.step(step * interval, calm)
    breach_from = calm_steps * interval  # the load changes right after the last calm sample
    high = (
        _records(interval, TARGET * 2, lag=4 * 1000 * factor)
        if by_lag
        else _records(interval, TARGET * 4 * factor)
    )
    now = breach_from
    while now < breach_from + window + interval:
        now += interval
        if run.step(now, high).outcome == Outcome.GROW:
            break
    grows = run.grows()
    assert grows, f"no growth {window + interval} s into the breach: {run.decisions[-1][1]}"
    (when, decision), *_ = grows
    assert when - breach_from <= window + interval
    assert decision.target is not None and decision.target >= min(policy.max_partitions, decision.desired)
    _check_invariants(run, 4)


@settings(max_examples=100, deadline=None)
@given(
    interval=intervals,
    window_steps=windows,
    cooldown_steps=st.integers(min_value=0, max_value=10),
    takes_steps=st.integers(min_value=1, max_value=8),
    maximum=st.integers(min_value=4, max_value=100),
    growth=st.sampled_from(list(Growth)),
    loads=st.lists(
        st.tuples(st.floats(min_value=0, max_value=20_000), st.floats(min_value=0, max_value=200_000)),
        min_size=1,
        max_size=150,
    ),
)
def test_any_load_keeps_bounds_one_expansion_at_a_time_and_the_cooldown(
    interval: int,
    window_steps: int,
    cooldown_steps: int,
    takes_steps: int,
    maximum: int,
    growth: Growth,
    loads: list[tuple[float, float]],
) -> None:
    cooldown = cooldown_steps * interval
    policy = _policy(window=window_steps * interval, cooldown=cooldown, max_partitions=maximum, growth=growth)
    run = Run(policy, 2, interval, takes=takes_steps * interval)
    ends: list[float] = []
    for step, (rate, lag) in enumerate(loads, start=1):
        ended = run.ended_at
        run.step(step * interval, _records(interval, rate, lag))
        if run.ended_at != ended and run.ended_at is not None:
            ends.append(run.ended_at)
    grows = [t for t, _ in run.grows()]
    for earlier_end, later in zip(ends, grows[1:], strict=False):
        assert later - earlier_end >= cooldown
    _check_invariants(run, 2)


@settings(max_examples=100, deadline=None)
@given(
    interval=intervals,
    window_steps=windows,
    cooldown_steps=st.integers(min_value=1, max_value=10),
    others=st.lists(  # another owner's (or a person's) expansions: step, seconds before it that it ended
        st.tuples(st.integers(min_value=1, max_value=80), st.integers(min_value=0, max_value=4)),
        max_size=6,
    ),
    factor=st.floats(min_value=1.2, max_value=5),
)
def test_the_cooldown_counts_from_any_expansion_of_the_topic_by_its_own_end(
    interval: int, window_steps: int, cooldown_steps: int, others: list[tuple[int, int]], factor: float
) -> None:
    cooldown = cooldown_steps * interval
    run = Run(_policy(window=window_steps * interval, cooldown=cooldown), 2, interval, takes=interval)
    external = {step: back for step, back in others}
    ends: list[tuple[float, float]] = []  # when each expansion ended, when the planner knew
    for step in range(1, 81):
        now = step * interval
        if step in external and run.in_flight is None:  # it ended before the operator noticed
            ended = now - min(external[step], cooldown_steps) * interval
            run.ended_at = max(run.ended_at or ended, ended)
            ends.append((ended, now))
        before = run.ended_at
        run.step(now, _records(interval, TARGET * run.partitions * factor))
        if run.ended_at != before and run.ended_at is not None:
            ends.append((run.ended_at, now))
    for when, _ in run.grows():
        assert all(when - end >= cooldown for end, known in ends if known <= when), (when, ends)
    _check_invariants(run, 2)


def test_falling_load_says_the_topic_is_below_capacity_and_never_shrinks() -> None:
    run = Run(_policy(window=10), 16, 1, takes=1)
    for now in range(1, 40):
        decision = run.step(now, _records(1, TARGET * 3))
    assert decision.below_capacity and decision.outcome == Outcome.STEADY
    assert run.counts[-1] == 16 and not run.grows()


def test_below_min_grows_at_once_and_at_max_says_so() -> None:
    policy = _policy(min_partitions=8)
    decision = decide(Situation(0, 2, []), policy)
    assert (decision.outcome, decision.target) == (Outcome.GROW, 8)
    run = Run(_policy(window=3, max_partitions=4), 4, 1, takes=1)
    for now in range(1, 10):
        decision = run.step(now, _records(1, TARGET * 40))
    assert decision.outcome == Outcome.AT_MAXIMUM and "maxPartitions 4" in decision.reason


@pytest.mark.parametrize(
    ("current", "desired", "maximum", "double", "fewest"),
    [
        (4, 5, 64, 8, 8),
        (4, 9, 64, 16, 12),
        (4, 9, 10, 10, 10),  # no multiple of 4 fits: 10's prior sets (2) beat 9's (4)
        (3, 7, 100, 12, 9),
        (2, 100, 64, 64, 64),
    ],
)
def test_grown_count_by_policy(current: int, desired: int, maximum: int, double: int, fewest: int) -> None:
    assert grown_count(current, desired, maximum, Growth.DOUBLE) == double
    chosen = grown_count(current, desired, maximum, Growth.FEWEST_PRIORS)
    candidates = range(min(desired, maximum), maximum + 1)
    best = min(largest_prior_set(current, n) for n in candidates)
    assert chosen == fewest
    assert largest_prior_set(current, chosen) == best and chosen == min(
        n for n in candidates if largest_prior_set(current, n) == best
    )


@given(old=st.integers(min_value=1, max_value=40), extra=st.integers(min_value=1, max_value=60))
def test_largest_prior_set_is_the_largest_of_the_prior_map(old: int, extra: int) -> None:
    new = old + extra
    assert largest_prior_set(old, new) == max(len(p) for p in prior_map(old, new).values())
