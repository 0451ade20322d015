"""The TopicAutoscaler daemon's choices, without servers: the status and Events after a decision,
refusals said once, what a taken name means, which of two autoscalers of a topic decides, when the
topic's last expansion ended by its own status, what a deleted autoscaler leaves to finish, and
when its connection's Secrets are read again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ordo.api import TopicAutoscalerStatus
from ordo_operator.plans.autoscale import Decision, Load, Outcome
from ordo_operator.plans.autoscale_peers import (
    RESOLVE_EVERY_SECONDS,
    expansion_ended_at,
    last_end,
    resolve_due,
    rival,
    to_release,
)
from ordo_operator.plans.autoscaler_status import (
    after_conflict,
    forget_refusal,
    measured_load,
    refused,
    shown,
)

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
LOAD = measured_load(Load(0, 1, 400.0, 40_000.0, {"billing": 9_000.0}), 4, 0.9349, NOW)


def _ready(status: TopicAutoscalerStatus) -> tuple[str, str]:
    (ready,) = [c for c in status.conditions if c.type == "Ready"]
    return ready.status.value, ready.reason


def test_measured_load_is_per_partition_of_todays_count_with_each_groups_lag() -> None:
    assert (LOAD.records_per_second_per_partition, LOAD.bytes_per_second_per_partition) == (100.0, 10_000.0)
    assert LOAD.lag_per_partition == {"billing": 2_250.0} and LOAD.records_per_offset == 0.935


def test_entering_at_maximum_is_an_event_once_and_status_shows_the_decision() -> None:
    at_max = Decision(Outcome.AT_MAXIMUM, 4, None, "900 records/s needs 9 partition(s); at maxPartitions")
    first = shown(TopicAutoscalerStatus(), at_max, 4, LOAD, 4, 3)
    assert [(e.type, e.reason) for e in first.events] == [("Normal", "AtMaximum")] and first.changed
    status = first.status
    assert (status.current_partitions, status.desired_partitions, status.observed_generation) == (4, 4, 3)
    assert _ready(status) == ("True", "Measuring") and status.load == LOAD
    kinds = {c.type: (c.status.value, c.reason) for c in status.conditions}
    assert kinds["AtMaximum"] == ("True", "AtMaximum") and kinds["BelowCapacity"][0] == "False"
    again = shown(status, at_max, 4, LOAD, 4, 3)
    assert again.events == () and not again.changed  # nothing new: no Event, no write needed
    steady = shown(status, Decision(Outcome.STEADY, 4, None, "fits", below_capacity=True), 4, LOAD, 4, 3)
    assert [e.reason for e in steady.events] == ["BelowCapacity"] and steady.changed
    assert {c.type: c.status.value for c in steady.status.conditions}["AtMaximum"] == "False"


def test_a_refusal_is_said_once_until_its_cause_is_gone() -> None:
    status, event = refused(TopicAutoscalerStatus(), "TopicMissing", "topic 'x' does not exist", None)
    assert event is not None and (event.type, event.reason) == ("Warning", "TopicMissing")
    assert _ready(status) == ("False", "TopicMissing") and status.message == "topic 'x' does not exist"
    status, again = refused(status, "TopicMissing", "topic 'x' does not exist", event.message)
    assert again is None
    assert forget_refusal(status, ("TopicMissing",)) and not forget_refusal(status, ("ExpansionEnded",))


@pytest.mark.parametrize(
    ("phase", "adopted"),
    [
        ("Pending", True),
        ("Fencing", True),
        (None, True),
        ("Completed", False),
        ("Failed", False),
        ("Aborted", False),
    ],
)
def test_a_taken_name_is_adopted_unless_that_expansion_ended(phase: str | None, adopted: bool) -> None:
    refusal = after_conflict("orders-8", phase, 8)
    assert (refusal is None) == adopted
    if refusal is not None:
        assert f"ended {phase}" in refusal and "delete it for the autoscaler to try again" in refusal


def test_the_older_autoscaler_of_a_topic_and_kafka_decides() -> None:
    old = ("shop/a", "2026-01-01T00:00:00Z", "")
    young = ("shop/b", "2026-01-02T00:00:00Z", "")
    tie = ("shop/0", "2026-01-02T00:00:00Z", "")
    assert rival([old, young], young) == "shop/a" and rival([old, young], old) is None
    assert rival([young, tie], young) == "shop/0" and rival([young, tie], tie) is None  # ties by name
    elsewhere = ("shop/c", "2025-01-01T00:00:00Z", "other-kafka:9092")
    assert rival([elsewhere, young], young) is None  # another cluster's topic of the same name
    assert rival([young], young) is None


@given(
    autoscalers=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(min_value=0, max_value=3)),
        min_size=1,
        max_size=4,
        unique_by=lambda e: e[0],
    )
)
def test_exactly_one_autoscaler_of_a_topic_decides(autoscalers: list[tuple[str, int]]) -> None:
    entries = [(f"ns/{name}", f"2026-01-0{day + 1}T00:00:00Z", "") for name, day in autoscalers]
    deciding = [e for e in entries if rival(entries, e) is None]
    assert len(deciding) == 1
    assert all(rival(entries, e) == deciding[0][0] for e in entries if e is not deciding[0])


def test_an_expansion_ended_when_its_own_status_says() -> None:
    started = NOW - timedelta(minutes=10)
    completed = {"phase": "Completed", "startedAt": started.isoformat(), "durationSeconds": 12.5}
    assert expansion_ended_at(completed) == started + timedelta(seconds=12.5)
    failed = {  # failed before it started: its conditions' newest transition
        "phase": "Failed",
        "conditions": [
            {"type": "Ready", "lastTransitionTime": "2026-11-28T11:00:00Z"},
            {"type": "Failed", "lastTransitionTime": "2026-11-28T11:05:00Z"},
        ],
    }
    assert expansion_ended_at(failed) == NOW - timedelta(minutes=55)
    assert expansion_ended_at({"phase": "Fencing", "startedAt": started.isoformat()}) is None
    assert expansion_ended_at({"phase": "Aborted"}) is None


def test_the_topics_last_end_is_the_newest_of_its_ended_expansions() -> None:
    entries = [
        ("shop/a", "Completed", "t", "2026-11-28T11:00:00+00:00"),
        ("other/b", "Aborted", "t", "2026-11-28T11:30:00+00:00"),  # another owner's counts as well
        ("shop/c", "Fencing", "t", ""),
        ("shop/d", "Failed", "t", ""),  # says nothing of when
    ]
    assert last_end(entries) == NOW - timedelta(minutes=30)
    assert last_end(entries[2:]) is None


def test_a_deleted_autoscaler_leaves_its_expansions_in_flight_to_finish() -> None:
    mine = {"uid": "u-1", "kind": "TopicAutoscaler", "name": "orders"}
    other = {"uid": "u-2", "kind": "Thing", "name": "x"}

    def expansion(name: str, phase: str, *owners: dict[str, str]) -> dict[str, object]:
        meta = {"name": name, "resourceVersion": f"rv-{name}", "ownerReferences": list(owners)}
        return {"metadata": meta, "status": {"phase": phase}}

    listed = [
        expansion("orders-4", "Completed", mine),  # ended: the garbage collector deletes it, undoing nothing
        expansion("orders-8", "Fencing", mine, other),
        expansion("orders-16", "Pending", mine),
        expansion("theirs-8", "Fencing", other),
    ]
    listed.append({"metadata": {"name": "orders-32", "resourceVersion": "r", "ownerReferences": [mine]}})
    assert to_release(listed, "u-1") == [
        ("orders-8", "rv-orders-8", [other]),
        ("orders-16", "rv-orders-16", []),
        ("orders-32", "r", []),  # no status yet: Pending
    ]


def test_the_connection_is_resolved_again_only_when_it_changed_or_a_while_passed() -> None:
    assert resolve_due(None, "", 0.0)
    assert not resolve_due(("conn", 100.0), "conn", 100.0 + RESOLVE_EVERY_SECONDS - 1)
    assert resolve_due(("conn", 100.0), "other", 101.0)
    assert resolve_due(("conn", 100.0), "conn", 100.0 + RESOLVE_EVERY_SECONDS)
