"""The chaos schedule: a pure function of a seed and a length, so a failing run is replayed exactly
(``ORDO_CHAOS_SEED``). The runner (``test_chaos.py``) turns each action into signals, processes,
custom resources and proxy faults; nothing here touches the world."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["FAULTS", "Action", "BrokerFault", "Kind", "Limits", "make_schedule", "members_over_time"]


class Kind(StrEnum):
    KILL_MEMBER = "kill-member"  # SIGKILL; a replacement pod starts (a Deployment would do that)
    PAUSE_MEMBER = "pause-member"  # SIGSTOP, SIGCONT after ``seconds``: a zombie if longer than the session
    MEMBER_JOIN = "member-join"
    MEMBER_LEAVE = "member-leave"  # SIGTERM: a graceful leave
    KILL_CONSUMER = "kill-consumer"  # SIGKILL; a replacement consumer starts
    PAUSE_CONSUMER = "pause-consumer"
    RESTART_OPERATOR = "restart-operator"  # SIGKILL + start
    EXPAND = "expand"  # an OrderedTopicExpansion of the data topic to ``partitions``
    DELETE_EXPANSION = "delete-expansion"  # ``kubectl delete`` of the last expansion, mid-flight
    BROKER_FAULT = "broker-fault"


@dataclass(frozen=True)
class BrokerFault:
    """A fault for the testbed proxy (``ordo_testbed.kafka.Fault``'s fields); ``data_topic``
    limits it to the data topic, else it matches any topic the API names."""

    api: str
    error: str | None = None
    delay: float | None = None
    drop: bool = False
    count: int | None = None
    duration: float | None = None
    data_topic: bool = True


# Retriable errors and short outages, the kind a healthy cluster shows during leader moves,
# coordinator failover and network blips. Each is bounded (count or duration).
FAULTS: tuple[BrokerFault, ...] = (
    BrokerFault("Produce", error="NOT_LEADER_OR_FOLLOWER", count=3),
    BrokerFault("Produce", delay=0.8, duration=3.0),
    BrokerFault("Produce", drop=True, count=1),
    BrokerFault("Fetch", error="NOT_LEADER_OR_FOLLOWER", count=3),
    BrokerFault("Fetch", drop=True, count=1),
    BrokerFault("Fetch", delay=0.5, duration=3.0),
    BrokerFault("ListOffsets", error="NOT_LEADER_OR_FOLLOWER", count=2),
    BrokerFault("CreatePartitions", error="REQUEST_TIMED_OUT", count=1),
    BrokerFault("EndTxn", error="COORDINATOR_NOT_AVAILABLE", count=2, data_topic=False),
    BrokerFault("EndTxn", error="CONCURRENT_TRANSACTIONS", count=2, data_topic=False),
    BrokerFault("OffsetCommit", error="COORDINATOR_NOT_AVAILABLE", count=3),
    BrokerFault("OffsetCommit", error="REBALANCE_IN_PROGRESS", count=2),
)


@dataclass(frozen=True, order=True)
class Action:
    at: float  # seconds after the chaos starts
    kind: Kind = field(compare=False)
    target: int = field(default=0, compare=False)  # which member/consumer: target mod how many run then
    seconds: float = field(default=0.0, compare=False)  # pause length
    partitions: int = field(default=0, compare=False)  # expansion target
    fault: BrokerFault | None = field(default=None, compare=False)

    def describe(self) -> str:
        extra = {
            Kind.PAUSE_MEMBER: f" {self.seconds:.1f}s",
            Kind.PAUSE_CONSUMER: f" {self.seconds:.1f}s",
            Kind.EXPAND: f" to {self.partitions}",
            Kind.BROKER_FAULT: f" {self.fault}",
        }.get(self.kind, "")
        return f"t+{self.at:6.1f}s {self.kind}{extra}"


@dataclass(frozen=True)
class Limits:
    members: int = 4  # at the start; joins and leaves keep it within [min_members, max_members]
    min_members: int = 3
    max_members: int = 5
    partitions: int = 2  # the data topic's count at the start
    max_partitions: int = 48
    mean_gap: float = 2.5  # seconds between two actions, on average
    warmup: float = 2.0  # nothing happens before
    cooldown: float = 8.0  # nor in the last seconds (the last expansion must be able to finish)
    expansion_gap: float = 12.0  # at least this long between two expansions
    max_pause: float = 5.0
    delete_chance: float = 0.0  # of an expansion (after the first) being deleted mid-flight

    @classmethod
    def soak(cls) -> Limits:
        """``make soak``: pauses past every session (the group's 3 s, its members' producers' 10 s,
        and their delivery timeout), and expansions deleted mid-flight, the first always."""
        return cls(max_pause=25.0, delete_chance=0.3)


# Weights of the background actions (expansions and the restarts tied to them are placed apart).
_WEIGHTS = {
    Kind.KILL_MEMBER: 3,
    Kind.PAUSE_MEMBER: 2,
    Kind.MEMBER_JOIN: 2,
    Kind.MEMBER_LEAVE: 2,
    Kind.KILL_CONSUMER: 2,
    Kind.PAUSE_CONSUMER: 2,
    Kind.RESTART_OPERATOR: 1,
    Kind.BROKER_FAULT: 4,
}


def make_schedule(seed: int, seconds: float, limits: Limits | None = None) -> list[Action]:
    """Every action of a run of ``seconds``, in time order: at least three expansions (one with
    the operator restarted while it runs), every kind of action and every fault of ``FAULTS`` at
    least once when the run is long enough to hold them."""
    lim = limits or Limits()
    rng = random.Random(seed)
    start, end = lim.warmup, seconds - lim.cooldown
    if end - start < 3 * lim.expansion_gap:
        raise ValueError(f"{seconds}s cannot hold three expansions {lim.expansion_gap}s apart")
    actions = _expansions(rng, start, end, lim)
    times = sorted(rng.uniform(start, end) for _ in range(int((end - start) / lim.mean_gap)))
    # Coverage first (a short run still sees every kind and fault), then weighted random picks.
    kinds: list[Kind] = [k for k in _WEIGHTS if k != Kind.BROKER_FAULT]
    faults = list(FAULTS)
    rng.shuffle(kinds)
    rng.shuffle(faults)
    coverage: list[tuple[Kind, BrokerFault | None]] = [(k, None) for k in kinds]
    coverage += [(Kind.BROKER_FAULT, f) for f in faults]
    rng.shuffle(coverage)
    members = lim.members
    for i, at in enumerate(times):
        if i < len(coverage):
            kind, fault = coverage[i]
        else:
            kind = rng.choices(list(_WEIGHTS), weights=list(_WEIGHTS.values()))[0]
            fault = rng.choice(FAULTS) if kind == Kind.BROKER_FAULT else None
        # joins and leaves keep the member count within its bounds (a leave becomes a join, ...)
        if kind == Kind.MEMBER_LEAVE and members <= lim.min_members:
            kind = Kind.MEMBER_JOIN
        elif kind == Kind.MEMBER_JOIN and members >= lim.max_members:
            kind = Kind.MEMBER_LEAVE
        members += {Kind.MEMBER_JOIN: 1, Kind.MEMBER_LEAVE: -1}.get(kind, 0)
        seconds_paused = round(rng.uniform(0.5, lim.max_pause), 2) if kind in _PAUSES else 0.0
        actions.append(Action(round(at, 2), kind, rng.randrange(1000), seconds_paused, fault=fault))
    return sorted(actions)


_PAUSES = (Kind.PAUSE_MEMBER, Kind.PAUSE_CONSUMER)


def _expansions(rng: random.Random, start: float, end: float, lim: Limits) -> list[Action]:
    """Expansions spread over the run with jitter, growing the topic by 1, 2 or doubling it, and
    an operator restart right after the first one (mid-expansion) and after some others."""
    count = max(3, min(20, int((end - start) // (2 * lim.expansion_gap))))
    spacing = (end - start) / count
    actions: list[Action] = []
    partitions = lim.partitions
    for i in range(count):
        growth = rng.choice([1, 1, 2, partitions])
        target = min(partitions + growth, lim.max_partitions)
        if target <= partitions:
            break  # the testbed's maximum is reached
        partitions = target
        at = start + i * spacing + rng.uniform(0, spacing - lim.expansion_gap)
        actions.append(Action(round(at, 2), Kind.EXPAND, partitions=partitions))
        if lim.delete_chance and (i == 1 or (i > 1 and rng.random() < lim.delete_chance)):
            actions.append(Action(round(at + rng.uniform(0.3, 3.0), 2), Kind.DELETE_EXPANSION))
        if i == 0 or rng.random() < 0.4:
            actions.append(Action(round(at + rng.uniform(0.2, 2.5), 2), Kind.RESTART_OPERATOR))
    return actions


def members_over_time(actions: list[Action], limits: Limits | None = None) -> list[int]:
    """How many members run after each action (kills are replaced)."""
    count = (limits or Limits()).members
    out = []
    for action in actions:
        count += {Kind.MEMBER_JOIN: 1, Kind.MEMBER_LEAVE: -1}.get(action.kind, 0)
        out.append(count)
    return out
