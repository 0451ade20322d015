"""One reconcile pass of a ProducerGroup, pure: from what the API shows (pods, Leases, the spec)
to the annotations to write, the status to show and what to tell people.

The handoff itself is ``plan_handoff``; this module turns Kubernetes objects into members,
stamps the group's settings on every assignment and words the outcome.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ordo.api import MemberStatus, PartitionCheckpoint, ProducerGroupSpec
from ordo.member_wire import GroupSettings, MemberAssignment, ProtocolError

from .handoff import HandoffPlan, Member, ShrinkBlocked, is_live, plan_handoff
from .sessions import LeaseSessions, LeaseView

__all__ = [
    "STATUS_PARTITION_ROWS",
    "GroupPass",
    "LeaseView",
    "PodView",
    "checkpoint_rows",
    "fresh_leases",
    "plan_group",
    "settings_of",
]

STATUS_PARTITION_ROWS = 1_000
"""Source partitions ``status.checkpoints`` lists at most: a row (partition, checkpoint, owner)
takes about 120 B, so listing all of 10,000 took 1.2 MB of an object etcd caps at 1.5 MiB."""


@dataclass(frozen=True)
class PodView:
    """A pod the selector matches, as far as the group is concerned."""

    name: str
    ready: bool
    deleting: bool
    assignment: str | None = None
    """Its ``ordo.dev/assignment`` annotation, as written."""


@dataclass(frozen=True)
class GroupPass:
    """The outcome of one pass."""

    generation: int
    writes: dict[str, MemberAssignment] = field(default_factory=dict)
    live: list[str] = field(default_factory=list)
    members: list[MemberStatus] = field(default_factory=list)
    standby: list[str] = field(default_factory=list)
    unassigned: list[int] = field(default_factory=list)
    settled: bool = True
    """Every live member acknowledged its assignment and nothing waits for a handoff."""
    problem: tuple[str, str] | None = None
    """(reason, message) of what keeps the group from being served as specified."""
    invalid_annotations: list[str] = field(default_factory=list)


def fresh_leases(
    leases: Mapping[str, LeaseView], now: datetime, sessions: LeaseSessions | float
) -> frozenset[str]:
    """The Leases held by their own pod and renewed within their session: all of ``now`` that a
    pass's outcome depends on (a pass that sees the same set and nothing else changed plans the same)."""
    if not isinstance(sessions, LeaseSessions):
        sessions = LeaseSessions(sessions)
    return frozenset(
        name
        for name, lease in leases.items()
        if lease.holder == name
        and lease.renewed is not None
        and now - lease.renewed <= timedelta(seconds=sessions.of(name))
    )


def settings_of(spec: ProducerGroupSpec) -> GroupSettings:
    return GroupSettings(
        session_timeout_seconds=spec.session_timeout_seconds,
        exactly_once=spec.exactly_once,
        checkpoint_topic=spec.checkpoint_topic,
        max_idle_seconds=spec.max_idle_seconds,
    )


def _members(
    group: str,
    pods: Iterable[PodView],
    leases: Mapping[str, LeaseView],
    now: datetime,
    sessions: LeaseSessions,
) -> tuple[list[Member], list[str]]:
    members: list[Member] = []
    invalid: list[str] = []
    for pod in pods:
        lease = leases.get(pod.name)
        held = lease is not None and lease.holder == pod.name  # a Lease of another name is not its own
        renewed = lease.renewed if lease is not None and held else None
        assignment = None
        if pod.assignment is not None:
            try:
                parsed = MemberAssignment.from_annotation(pod.assignment, pod.name)
            except ProtocolError as error:
                invalid.append(str(error))
            else:
                assignment = parsed if parsed.group == group else None
        members.append(
            Member(
                name=pod.name,
                live=is_live(pod.ready, pod.deleting, renewed, now, timedelta(seconds=sessions.of(pod.name))),
                assignment=assignment,
                acked=lease.acked if lease is not None else None,
            )
        )
    return members, invalid


def plan_group(
    group: str,
    spec: ProducerGroupSpec,
    pods: Iterable[PodView],
    leases: Mapping[str, LeaseView],
    now: datetime,
    generation: int,
    sessions: LeaseSessions | None = None,
    checkpointed: int = 0,
) -> GroupPass:
    """The next pass: annotations to write (with the group's settings) and what to report.

    ``generation`` is the latest generation written so far (status, or annotations if later);
    ``sessions`` what each Lease is judged by (``lease_sessions``; the spec's for all if None);
    ``checkpointed`` the highest generation the group's checkpoints carry."""
    pods = list(pods)
    settings = settings_of(spec)
    sessions = sessions or LeaseSessions(spec.session_timeout_seconds)
    members, invalid = _members(group, pods, leases, now, sessions)
    # above every generation a member acknowledged too: a group deleted and created again (to
    # change exactlyOnce) finds Leases acknowledging the old group's generations, and a new
    # generation at or below those would count as acknowledged before the member saw it
    acked = [lease.acked for lease in leases.values() if lease.acked is not None]
    generation = max([generation, *acked] + [m.assignment.generation for m in members if m.assignment])
    # and above every generation a checkpoint carries: checkpoint readers refuse a checkpoint of
    # an older generation than one they have seen (a zombie's), and the topic outlives the group
    # (deleted and created again, its Leases gone with its pods)
    behind = checkpointed > generation
    generation = max(generation, checkpointed)
    live = [m for m in members if m.live]
    try:
        plan = plan_handoff(group, spec.source_partitions, members, generation, spec.assignment)
    except ShrinkBlocked as error:
        return GroupPass(
            generation=generation,
            live=[m.name for m in live],
            members=_member_status(live, None),
            settled=False,
            problem=("ShrinkBlocked", str(error)),
            invalid_annotations=invalid,
        )
    writes = _with_settings(plan, live, settings, restamp=behind)
    next_generation = generation + 1 if writes else generation
    writes = {pod: a.model_copy(update={"generation": next_generation}) for pod, a in writes.items()}
    owned = _after(live, writes)
    standby = sorted(m.name for m in live if not plan.target.get(m.name))
    settled = not plan.waiting and not writes and all(m.settled for m in live)
    problem = None
    if not pods:
        problem = ("NoMembers", f"the selector {spec.selector.to_query() or '(empty)'} matches no pod")
    elif not live:
        problem = ("NoLiveMembers", f"none of the {len(pods)} selected pods is Ready with a fresh Lease")
    elif plan.unassigned and not plan.waiting:
        problem = ("PartitionsUnassigned", f"source partitions {plan.unassigned} have no owner")
    return GroupPass(
        generation=next_generation,
        writes=writes,
        live=[m.name for m in live],
        members=_member_status(live, owned),
        standby=standby,
        unassigned=plan.unassigned,
        settled=settled,
        problem=problem,
        invalid_annotations=invalid,
    )


def _with_settings(
    plan: HandoffPlan, live: list[Member], settings: GroupSettings, restamp: bool
) -> dict[str, MemberAssignment]:
    """The plan's writes, each carrying the settings; plus members whose settings are stale, or
    every member's when ``restamp`` (their generation is below the checkpoints')."""
    writes = {pod: a.with_settings(settings) for pod, a in plan.writes.items()}
    for m in live:
        if (
            m.name not in writes
            and m.assignment is not None
            and (restamp or m.assignment.settings != settings)
        ):
            writes[m.name] = m.assignment.with_settings(settings)
    return writes


def _after(live: list[Member], writes: Mapping[str, MemberAssignment]) -> dict[str, tuple[int, ...]]:
    return {m.name: writes[m.name].partitions if m.name in writes else m.owned for m in live}


def _member_status(live: list[Member], owned: Mapping[str, tuple[int, ...]] | None) -> list[MemberStatus]:
    return [
        MemberStatus(
            pod=m.name, partitions=list(owned[m.name] if owned is not None else m.owned), acked=m.acked
        )
        for m in sorted(live, key=lambda m: m.name)
    ]


def checkpoint_rows(
    partitions: int,
    checkpoints: Mapping[int, str | None],
    owners: Mapping[int, str],
    limit: int = STATUS_PARTITION_ROWS,
) -> list[PartitionCheckpoint]:
    """``status.checkpoints``: the first ``limit`` source partitions, each with its checkpoint
    and owner when it has them (the checkpoint topic holds every partition's)."""
    return [
        PartitionCheckpoint(partition=p, checkpoint=checkpoints.get(p), owner=owners.get(p))
        for p in range(min(partitions, limit))
    ]
