"""plan_group: from pods and Leases to annotations, standby, problems — no servers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ordo.api import ProducerGroupSpec
from ordo.member_wire import MemberAssignment
from ordo_operator.plans.group import LeaseView, PodView, plan_group, settings_of

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
SPEC = ProducerGroupSpec.model_validate(
    {"sourcePartitions": 4, "selector": {"matchLabels": {"app": "x"}}, "sessionTimeoutSeconds": 10}
)


def _pod(name: str, assignment: MemberAssignment | None = None, ready: bool = True) -> PodView:
    return PodView(
        name, ready=ready, deleting=False, assignment=assignment.to_annotation() if assignment else None
    )


def _lease(name: str, age: float = 1.0, acked: int | None = None, holder: str | None = "") -> LeaseView:
    return LeaseView(
        name, holder=name if holder == "" else holder, renewed=NOW - timedelta(seconds=age), acked=acked
    )


def _owned(
    partitions: tuple[int, ...], generation: int = 1, revoking: tuple[int, ...] = ()
) -> MemberAssignment:
    return MemberAssignment(
        group="g", generation=generation, partitions=partitions, revoking=revoking, settings=settings_of(SPEC)
    )


def test_the_first_member_gets_everything_with_the_groups_settings() -> None:
    step = plan_group("g", SPEC, [_pod("a")], {"a": _lease("a")}, NOW, 0)
    assert step.generation == 1
    assert step.writes["a"].partitions == (0, 1, 2, 3)
    assert step.writes["a"].settings == settings_of(SPEC)
    assert not step.settled and step.problem is None


def test_a_settled_group_writes_nothing() -> None:
    step = plan_group("g", SPEC, [_pod("a", _owned((0, 1, 2, 3)))], {"a": _lease("a", acked=1)}, NOW, 1)
    assert step.writes == {} and step.settled and step.generation == 1


def test_a_joining_member_waits_for_the_revocation_to_be_acknowledged() -> None:
    pods = [_pod("a", _owned((0, 1, 2, 3))), _pod("b")]
    step = plan_group("g", SPEC, pods, {"a": _lease("a", acked=1), "b": _lease("b")}, NOW, 1)
    assert step.writes["a"].partitions == (0, 1) and step.writes["a"].revoking == (2, 3)
    assert step.writes["b"].partitions == ()
    assert not step.settled


def test_an_expired_lease_is_not_a_member_and_its_partitions_move_at_once() -> None:
    pods = [_pod("a", _owned((0, 1))), _pod("b", _owned((2, 3)))]
    leases = {"a": _lease("a", acked=1), "b": _lease("b", age=30, acked=1)}
    step = plan_group("g", SPEC, pods, leases, NOW, 1)
    assert step.live == ["a"]
    assert step.writes["a"].partitions == (0, 1, 2, 3)
    assert step.writes["b"].partitions == ()


def test_a_lease_held_by_another_name_or_released_does_not_count() -> None:
    pods = [_pod("a"), _pod("b")]
    leases = {"a": _lease("a", holder="someone-else"), "b": _lease("b", holder=None)}
    step = plan_group("g", SPEC, pods, leases, NOW, 0)
    assert step.live == [] and step.problem is not None and step.problem[0] == "NoLiveMembers"


def test_more_members_than_partitions_leaves_standbys() -> None:
    spec = SPEC.model_copy(update={"source_partitions": 1})
    pods = [_pod("a"), _pod("b")]
    step = plan_group("g", spec, pods, {"a": _lease("a"), "b": _lease("b")}, NOW, 0)
    assert len(step.standby) == 1 and step.unassigned == []


def test_problems_are_named() -> None:
    assert plan_group("g", SPEC, [], {}, NOW, 0).problem[0] == "NoMembers"  # type: ignore[index]
    shrunk = SPEC.model_copy(update={"source_partitions": 2})
    step = plan_group("g", shrunk, [_pod("a", _owned((0, 1, 2, 3)))], {"a": _lease("a", acked=1)}, NOW, 1)
    assert step.problem is not None and step.problem[0] == "ShrinkBlocked" and step.writes == {}


def test_a_changed_setting_reaches_every_member_in_a_new_generation() -> None:
    spec = SPEC.model_copy(update={"session_timeout_seconds": 20})
    step = plan_group("g", spec, [_pod("a", _owned((0, 1, 2, 3)))], {"a": _lease("a", acked=1)}, NOW, 1)
    assert step.generation == 2 and step.writes["a"].settings == settings_of(spec)
    assert step.writes["a"].partitions == (0, 1, 2, 3)


def test_malformed_annotations_and_other_groups_are_reported_not_trusted() -> None:
    garbled = PodView("a", ready=True, deleting=False, assignment="{not json")
    other = PodView(
        "b",
        ready=True,
        deleting=False,
        assignment=_owned((0,)).model_copy(update={"group": "h"}).to_annotation(),
    )
    step = plan_group("g", SPEC, [garbled, other], {"a": _lease("a"), "b": _lease("b")}, NOW, 0)
    assert len(step.invalid_annotations) == 1 and "malformed" in step.invalid_annotations[0]
    assert sorted(p for a in step.writes.values() for p in a.partitions) == [0, 1, 2, 3]


def test_a_group_created_again_numbers_its_generations_above_what_leases_acknowledged() -> None:
    """Deleting a group (to change exactlyOnce) leaves the members' Leases acknowledging its
    generations; the new group's first handoff must not count as acknowledged before it is."""
    pods = [_pod("a"), _pod("b")]
    leases = {"a": _lease("a", acked=7), "b": _lease("b", acked=5)}
    step = plan_group("g", SPEC, pods, leases, NOW, 0)
    assert step.generation == 8
    assert not step.settled, "no member has acknowledged generation 8 yet"


def test_max_idle_seconds_reaches_the_members() -> None:
    spec = SPEC.model_copy(update={"max_idle_seconds": 42})
    step = plan_group("g", spec, [_pod("a")], {"a": _lease("a")}, NOW, 0)
    settings = step.writes["a"].settings
    assert settings is not None and settings.max_idle_seconds == 42


def test_status_lists_the_first_thousand_source_partitions_so_it_fits_an_object() -> None:
    import json

    from ordo_operator.plans.group import STATUS_PARTITION_ROWS, checkpoint_rows

    small = checkpoint_rows(3, {0: "2026-11-25T17:01:00Z", 2: None}, {1: "m-1"})
    assert [r.model_dump(by_alias=True, exclude_none=True, mode="json") for r in small] == [
        {"partition": 0, "checkpoint": "2026-11-25T17:01:00Z"},
        {"partition": 1, "owner": "m-1"},
        {"partition": 2},
    ]
    partitions = 100_000  # the schema's maximum
    owner = "orders-cdc-042-7c9f8d6b5-x2k4q"
    rows = checkpoint_rows(
        partitions, dict.fromkeys(range(partitions), "2026-11-25T17:01:00.123456+00:00"),
        dict.fromkeys(range(partitions), owner),
    )  # fmt: skip
    assert len(rows) == STATUS_PARTITION_ROWS and rows[-1].partition == STATUS_PARTITION_ROWS - 1
    # listing all took about 12 MB here (1.2 MB at 10,000), against etcd's 1.5 MiB per object
    assert (
        len(json.dumps([r.model_dump(by_alias=True, exclude_none=True, mode="json") for r in rows])) < 200_000
    )


def test_generations_go_above_what_the_groups_checkpoints_carry() -> None:
    """Checkpoint readers refuse a checkpoint of an older generation than one they have seen, and
    the checkpoint topic outlives a group deleted and created again: its generations start above."""
    first = plan_group("g", SPEC, [_pod("a")], {"a": _lease("a")}, NOW, 0, checkpointed=57)
    assert first.generation == 58 and first.writes["a"].partitions == (0, 1, 2, 3)
    # a group numbered below its checkpoints before (an older operator): every member again, above
    pods = [_pod("a", _owned((0, 1), generation=3)), _pod("b", _owned((2, 3), generation=3))]
    leases = {"a": _lease("a", acked=3), "b": _lease("b", acked=3)}
    restamped = plan_group("g", SPEC, pods, leases, NOW, 3, checkpointed=57)
    assert restamped.generation == 58
    assert {pod: a.partitions for pod, a in restamped.writes.items()} == {"a": (0, 1), "b": (2, 3)}
    ordinary = plan_group("g", SPEC, pods, leases, NOW, 3, checkpointed=3)
    assert ordinary.writes == {} and ordinary.settled, "its own checkpoints never renumber a group"
