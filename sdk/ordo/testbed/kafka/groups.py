"""Kafka's classic consumer-group coordinator as a pure state machine: no I/O, time passed in.

Follows Apache Kafka's (pre-KIP-848) GroupCoordinator: Empty -> PreparingRebalance ->
CompletingRebalance -> Stable, one generation per completed rebalance, the first member as leader,
protocol chosen by vote among the protocols every member supports. JoinGroup and SyncGroup answers
may be deferred: callers pass a ``waiter`` that is called exactly once, now or on a later call.
Static membership (group.instance.id) is not implemented: such members are treated as dynamic.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode


class State(enum.Enum):
    EMPTY = "Empty"
    PREPARING = "PreparingRebalance"
    COMPLETING = "CompletingRebalance"
    STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None
    session_timeout: float  # seconds
    rebalance_timeout: float
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool  # JoinGroup v4+: a new member first gets MEMBER_ID_REQUIRED


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[MemberMetadata, ...] = ()  # only in the leader's answer


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class MemberView:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupView:
    group_id: str
    state: State
    generation: int
    protocol_type: str
    protocol_name: str  # "" unless Stable, as Kafka's DescribeGroups reports it
    leader: str | None
    members: tuple[MemberView, ...]


log = logging.getLogger(__name__)

JoinWaiter = Callable[[JoinResult], None]
SyncWaiter = Callable[[SyncResult], None]


@dataclass(slots=True)
class _Member:
    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None
    session_timeout: float
    rebalance_timeout: float
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    deadline: float
    assignment: bytes = b""
    join_waiter: JoinWaiter | None = None
    sync_waiter: SyncWaiter | None = None

    def metadata(self, protocol: str | None) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")

    def can_expire(self) -> bool:
        # A member blocked in JoinGroup/SyncGroup cannot heartbeat; the rebalance timeout covers it.
        return self.join_waiter is None and self.sync_waiter is None

    def expired(self, now: float) -> bool:
        return self.can_expire() and now >= self.deadline


@dataclass(slots=True)
class _Group:
    group_id: str
    state: State = State.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, _Member] = field(default_factory=dict)
    pending: dict[str, float] = field(default_factory=dict)  # MEMBER_ID_REQUIRED ids -> expiry
    rebalance_deadline: float | None = None
    delay_until: float | None = None  # group.initial.rebalance.delay.ms window
    delay_budget: float = 0.0
    joined_during_delay: bool = False

    def candidates(self) -> set[str]:
        """Protocols every member supports."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def all_joined(self) -> bool:
        return not self.pending and all(m.join_waiter is not None for m in self.members.values())


class GroupCoordinator:
    """All groups of one coordinator. ``generations``: saved generation ids to continue from."""

    def __init__(
        self,
        *,
        min_session_timeout: float = 1.0,
        max_session_timeout: float = 1800.0,
        initial_rebalance_delay: float = 0.0,
        new_member_id: Callable[[str], str] | None = None,
        on_generation: Callable[[str, int], None] | None = None,
    ) -> None:
        self.min_session_timeout = min_session_timeout
        self.max_session_timeout = max_session_timeout
        self.initial_rebalance_delay = initial_rebalance_delay
        self._new_member_id = new_member_id or (lambda client_id: f"{client_id}-{uuid.uuid4()}")
        self._on_generation = on_generation
        self._groups: dict[str, _Group] = {}

    # -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ------------------------------------------

    def join(self, now: float, req: JoinRequest, waiter: JoinWaiter) -> None:
        def fail(error: ErrorCode) -> None:
            waiter(JoinResult(error, req.member_id))

        if not req.group_id:
            return fail(ErrorCode.invalid_group_id)
        if not self.min_session_timeout <= req.session_timeout <= self.max_session_timeout:
            return fail(ErrorCode.invalid_session_timeout)
        group = self._groups.get(req.group_id)
        if req.member_id and (group is None or not self._knows(group, req.member_id)):
            return fail(ErrorCode.unknown_member_id)
        if group is None:
            group = self._groups[req.group_id] = _Group(req.group_id)
        if not self._supports(group, req.protocol_type, req.protocols):
            return fail(ErrorCode.inconsistent_group_protocol)
        if not req.member_id:
            member_id = self._new_member_id(req.client_id)
            if req.require_known_member_id:
                group.pending[member_id] = now + req.session_timeout
                return waiter(JoinResult(ErrorCode.member_id_required, member_id))
            return self._add_and_rebalance(now, group, member_id, req, waiter)
        if req.member_id in group.pending:
            del group.pending[req.member_id]
            return self._add_and_rebalance(now, group, req.member_id, req, waiter)
        member = group.members[req.member_id]
        same = member.protocols == req.protocols
        if group.state is State.PREPARING:
            return self._update_and_rebalance(now, group, member, req, waiter)
        if group.state is State.COMPLETING and same:
            return waiter(self._join_result(group, member))
        if group.state is State.STABLE and same and group.leader != member.member_id:
            member.deadline = now + member.session_timeout
            return waiter(self._join_result(group, member))
        return self._update_and_rebalance(now, group, member, req, waiter)

    def sync(
        self,
        now: float,
        group_id: str,
        generation: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        waiter: SyncWaiter,
    ) -> None:
        group = self._groups.get(group_id)
        if group is None or member_id not in group.members:
            return waiter(SyncResult(ErrorCode.unknown_member_id))
        if generation != group.generation:
            return waiter(SyncResult(ErrorCode.illegal_generation))
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return waiter(SyncResult(ErrorCode.inconsistent_group_protocol))
        if group.state is State.PREPARING:
            return waiter(SyncResult(ErrorCode.rebalance_in_progress))
        member = group.members[member_id]
        member.deadline = now + member.session_timeout
        if group.state is State.STABLE:
            return waiter(self._sync_result(group, member))
        previous, member.sync_waiter = member.sync_waiter, waiter
        if previous is not None:
            previous(SyncResult(ErrorCode.rebalance_in_progress))
        if member_id == group.leader:
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id, b"")
            group.state = State.STABLE
            log.debug("group %s: generation %d stable", group_id, generation)
            for other in group.members.values():
                self._answer_sync(now, group, other, None)

    def heartbeat(self, now: float, group_id: str, generation: int, member_id: str) -> ErrorCode:
        group = self._groups.get(group_id)
        if group is None or member_id not in group.members:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        member = group.members[member_id]
        member.deadline = now + member.session_timeout
        if group.state is State.PREPARING:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, now: float, group_id: str, member_ids: Iterable[str]) -> list[ErrorCode]:
        """One error per leaving member."""
        errors = []
        group = self._groups.get(group_id)
        for member_id in member_ids:
            if group is not None and member_id in group.pending:
                del group.pending[member_id]
                self._try_complete(now, group)
                errors.append(ErrorCode.none)
            elif group is not None and member_id in group.members:
                self._remove(now, group, group.members[member_id], "leaves")
                errors.append(ErrorCode.none)
            else:
                errors.append(ErrorCode.unknown_member_id)
        return errors

    # -- offset commit validation ----------------------------------------------------------------

    def validate_commit(self, now: float, group_id: str, generation: int, member_id: str) -> ErrorCode:
        """Kafka's checks for OffsetCommit; a simple (generation < 0) commit creates the group."""
        group = self._groups.get(group_id)
        if group is None:
            if generation >= 0:
                return ErrorCode.illegal_generation
            group = self._groups[group_id] = _Group(group_id)
        if generation < 0 and group.state is State.EMPTY:
            return ErrorCode.none
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        if group.state is State.COMPLETING:
            return ErrorCode.rebalance_in_progress
        member.deadline = now + member.session_timeout
        return ErrorCode.none

    def validate_txn_commit(self, group_id: str, generation: int, member_id: str) -> ErrorCode:
        """Kafka's checks for TxnOffsetCommit (member checks only when the request names one)."""
        group = self._groups.setdefault(group_id, _Group(group_id))
        if member_id and member_id not in group.members:
            return ErrorCode.unknown_member_id
        if generation >= 0 and generation != group.generation:
            return ErrorCode.illegal_generation
        return ErrorCode.none

    # -- time ------------------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        """Expire sessions, pending member ids, initial delays and rebalance timeouts."""
        for group in list(self._groups.values()):
            expired_pending = [m for m, deadline in group.pending.items() if now >= deadline]
            for member_id in expired_pending:
                del group.pending[member_id]
            for member in [m for m in group.members.values() if m.expired(now)]:
                if member.member_id in group.members:
                    self._remove(now, group, member, "session expired")
            if group.delay_until is not None and now >= group.delay_until:
                if group.joined_during_delay and group.delay_budget > 0:
                    step = min(self.initial_rebalance_delay, group.delay_budget)
                    group.delay_until, group.delay_budget = now + step, group.delay_budget - step
                    group.joined_during_delay = False
                else:
                    group.delay_until = None
            if group.state is State.PREPARING:
                if group.rebalance_deadline is not None and now >= group.rebalance_deadline:
                    self._complete_join(now, group)
                else:
                    self._try_complete(now, group)
            elif expired_pending:
                self._try_complete(now, group)

    def next_deadline(self) -> float | None:
        deadlines: list[float] = []
        for group in self._groups.values():
            deadlines.extend(group.pending.values())
            deadlines.extend(m.deadline for m in group.members.values() if m.can_expire())
            for extra in (group.rebalance_deadline, group.delay_until):
                if extra is not None:
                    deadlines.append(extra)
        return min(deadlines, default=None)

    # -- administration --------------------------------------------------------------------------

    def ensure(self, group_id: str, generation: int = 0) -> None:
        """Register a group known from stored offsets (an Empty group, as Kafka loads it)."""
        group = self._groups.setdefault(group_id, _Group(group_id))
        group.generation = max(group.generation, generation)

    def describe(self, group_id: str) -> GroupView | None:
        group = self._groups.get(group_id)
        if group is None:
            return None
        stable = group.state is State.STABLE
        members = tuple(
            MemberView(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        name = (group.protocol_name or "") if stable else ""
        return GroupView(
            group_id, group.state, group.generation, group.protocol_type or "", name, group.leader, members
        )

    def group_ids(self) -> list[str]:
        return list(self._groups)

    def delete(self, group_id: str) -> ErrorCode:
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.state is not State.EMPTY:
            return ErrorCode.non_empty_group
        del self._groups[group_id]
        return ErrorCode.none

    # -- internals -------------------------------------------------------------------------------

    @staticmethod
    def _knows(group: _Group, member_id: str) -> bool:
        return member_id in group.members or member_id in group.pending

    @staticmethod
    def _supports(group: _Group, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        if not protocol_type or not protocols:
            return False
        if not group.members:
            return True
        return protocol_type == group.protocol_type and bool({n for n, _ in protocols} & group.candidates())

    def _add_and_rebalance(
        self, now: float, group: _Group, member_id: str, req: JoinRequest, waiter: JoinWaiter
    ) -> None:
        member = _Member(
            member_id,
            req.client_id,
            req.client_host,
            req.instance_id,
            req.session_timeout,
            req.rebalance_timeout,
            req.protocol_type,
            req.protocols,
            deadline=now + req.session_timeout,
            join_waiter=waiter,
        )
        if not group.members:
            group.protocol_type = req.protocol_type
        group.members[member_id] = member
        if group.leader is None:
            group.leader = member_id
        group.joined_during_delay = True
        self._prepare_rebalance(now, group, f"{member_id} joins")

    def _update_and_rebalance(
        self, now: float, group: _Group, member: _Member, req: JoinRequest, waiter: JoinWaiter
    ) -> None:
        previous, member.join_waiter = member.join_waiter, waiter
        if previous is not None:
            previous(JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        member.protocols = req.protocols
        member.session_timeout = req.session_timeout
        member.rebalance_timeout = req.rebalance_timeout
        member.client_id, member.client_host = req.client_id, req.client_host
        self._prepare_rebalance(now, group, f"{member.member_id} rejoins")

    def _prepare_rebalance(self, now: float, group: _Group, reason: str) -> None:
        if group.state is State.PREPARING:
            self._try_complete(now, group)
            return
        if group.state is State.COMPLETING:
            for member in group.members.values():
                member.assignment = b""
                waiter, member.sync_waiter = member.sync_waiter, None
                if waiter is not None:
                    waiter(SyncResult(ErrorCode.rebalance_in_progress))
        timeout = max((m.rebalance_timeout for m in group.members.values()), default=0.0)
        if group.state is State.EMPTY and self.initial_rebalance_delay > 0:
            step = min(self.initial_rebalance_delay, timeout)
            group.delay_until, group.delay_budget = now + step, timeout - step
            group.joined_during_delay = False
        group.rebalance_deadline = now + timeout
        log.debug("group %s: rebalance after generation %d: %s", group.group_id, group.generation, reason)
        group.state = State.PREPARING
        self._try_complete(now, group)

    def _try_complete(self, now: float, group: _Group) -> None:
        if group.state is State.PREPARING and group.delay_until is None and group.all_joined():
            self._complete_join(now, group)

    def _complete_join(self, now: float, group: _Group) -> None:
        for member in [m for m in group.members.values() if m.join_waiter is None]:
            log.debug("group %s: %s missed the rebalance", group.group_id, member.member_id)
            self._drop(now, group, member)
        group.rebalance_deadline = group.delay_until = None
        group.generation += 1
        if self._on_generation is not None:
            self._on_generation(group.group_id, group.generation)
        if not group.members:
            group.state, group.protocol_name = State.EMPTY, None
            return
        group.protocol_name = self._select_protocol(group)
        group.state = State.COMPLETING
        log.debug("group %s: generation %d: %s", group.group_id, group.generation, list(group.members))
        for member in group.members.values():
            member.deadline = now + member.session_timeout
            waiter, member.join_waiter = member.join_waiter, None
            assert waiter is not None
            waiter(self._join_result(group, member))

    @staticmethod
    def _select_protocol(group: _Group) -> str:
        candidates = group.candidates()
        votes = Counter(
            next(name for name, _ in m.protocols if name in candidates) for m in group.members.values()
        )
        # Ties go to the leader's preference (every candidate is one of the leader's protocols).
        leader = group.members.get(group.leader or "") or next(iter(group.members.values()))
        order = [name for name, _ in leader.protocols]
        return max(votes, key=lambda name: (votes[name], -order.index(name)))

    def _join_result(self, group: _Group, member: _Member) -> JoinResult:
        members: tuple[MemberMetadata, ...] = ()
        if member.member_id == group.leader:
            members = tuple(
                MemberMetadata(m.member_id, m.instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()
            )
        return JoinResult(
            ErrorCode.none,
            member.member_id,
            group.generation,
            group.protocol_type,
            group.protocol_name,
            group.leader or "",
            members,
        )

    @staticmethod
    def _sync_result(group: _Group, member: _Member) -> SyncResult:
        return SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment)

    def _answer_sync(self, now: float, group: _Group, member: _Member, error: ErrorCode | None) -> None:
        waiter, member.sync_waiter = member.sync_waiter, None
        member.deadline = now + member.session_timeout  # its session restarts with the answer
        if waiter is not None:
            waiter(SyncResult(error) if error is not None else self._sync_result(group, member))

    def _drop(self, now: float, group: _Group, member: _Member) -> None:
        del group.members[member.member_id]
        if group.leader == member.member_id:
            group.leader = next(iter(group.members), None)
        waiter, member.join_waiter = member.join_waiter, None
        if waiter is not None:
            waiter(JoinResult(ErrorCode.unknown_member_id, member.member_id))
        self._answer_sync(now, group, member, ErrorCode.unknown_member_id)

    def _remove(self, now: float, group: _Group, member: _Member, reason: str) -> None:
        """A member left or its session expired: the others must rebalance."""
        self._drop(now, group, member)
        if group.state in (State.STABLE, State.COMPLETING):
            self._prepare_rebalance(now, group, f"{member.member_id} {reason}")
        elif group.state is State.PREPARING:
            self._try_complete(now, group)
