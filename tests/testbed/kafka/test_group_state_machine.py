"""The proxy's classic group coordinator, offset store and producer fencing, without sockets."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

from kio.schema.errors import ErrorCode

from ordo.testbed.kafka.fencing import ProducerEpochs, fenced_error
from ordo.testbed.kafka.groups import GroupCoordinator, JoinRequest, JoinResult, State, SyncResult
from ordo.testbed.kafka.offsets import Committed, OffsetStore

RANGE = (("range", b"meta"),)
G = "g"


@dataclass
class Answers:
    """What a waiter received (empty while the coordinator holds the request)."""

    results: list[JoinResult | SyncResult] = field(default_factory=list)

    def __call__(self, result: JoinResult | SyncResult) -> None:
        self.results.append(result)

    @property
    def join(self) -> JoinResult:
        assert len(self.results) == 1, self.results
        result = self.results[0]
        assert isinstance(result, JoinResult)
        return result

    @property
    def sync(self) -> SyncResult:
        assert len(self.results) == 1, self.results
        result = self.results[0]
        assert isinstance(result, SyncResult)
        return result


class Bed:
    def __init__(self, initial_delay: float = 0.0) -> None:
        ids = itertools.count(1)
        self.coordinator = GroupCoordinator(
            initial_rebalance_delay=initial_delay, new_member_id=lambda client: f"{client}-{next(ids)}"
        )
        self.now = 100.0

    def join(
        self,
        member_id: str = "",
        protocols: tuple[tuple[str, bytes], ...] = RANGE,
        session: float = 10.0,
        rebalance: float = 30.0,
        protocol_type: str = "consumer",
    ) -> Answers:
        answers = Answers()
        request = JoinRequest(
            G, member_id, "client", "/127.0.0.1", None, session, rebalance, protocol_type, protocols, True
        )
        self.coordinator.join(self.now, request, answers)
        return answers

    def member(self, session: float = 10.0, rebalance: float = 30.0) -> str:
        """A new member's id, handed out by the MEMBER_ID_REQUIRED round (it has not joined yet)."""
        first = self.join(session=session, rebalance=rebalance)
        assert first.join.error == ErrorCode.member_id_required
        return first.join.member_id

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None) -> Answers:
        answers = Answers()
        self.coordinator.sync(self.now, G, generation, member_id, None, None, assignments or {}, answers)
        return answers

    def leave(self, members: list[str]) -> list[ErrorCode]:
        return self.coordinator.leave(self.now, G, members)

    def heartbeat(self, member_id: str, generation: int) -> ErrorCode:
        return self.coordinator.heartbeat(self.now, G, generation, member_id)

    def state(self) -> State:
        view = self.coordinator.describe(G)
        assert view is not None
        return view.state

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.coordinator.tick(self.now)

    def stable_pair(self) -> tuple[str, str, int]:
        """Two members in a Stable group: (leader, follower, generation)."""
        a = self.member()
        joined_a = self.join(a)
        assert joined_a.join.generation == 1
        self.sync(a, 1, {a: b"all"})
        b = self.member()
        joined_b = self.join(b)
        assert not joined_b.results  # waits for the leader to rejoin
        assert self.heartbeat(a, 1) == ErrorCode.rebalance_in_progress
        rejoined = self.join(a)
        generation = rejoined.join.generation
        assert generation == 2 and joined_b.join.generation == 2
        follower = self.sync(b, 2)
        assert not follower.results  # waits for the leader's assignments
        self.sync(a, 2, {a: b"A", b: b"B"})
        assert follower.sync.assignment == b"B"
        return a, b, generation


def test_new_member_gets_an_id_then_leads_generation_1() -> None:
    bed = Bed()
    first = bed.join()
    assert first.join.error == ErrorCode.member_id_required and first.join.member_id == "client-1"
    assert bed.state() is State.EMPTY  # a MEMBER_ID_REQUIRED answer does not rebalance
    joined = bed.join("client-1").join
    assert (joined.error, joined.generation, joined.leader, joined.protocol_name) == (
        ErrorCode.none,
        1,
        "client-1",
        "range",
    )
    assert [m.member_id for m in joined.members] == ["client-1"]
    assert bed.state() is State.COMPLETING
    assert bed.sync("client-1", 1, {"client-1": b"x"}).sync.assignment == b"x"
    assert bed.state() is State.STABLE


def test_unknown_member_and_invalid_requests_are_rejected() -> None:
    bed = Bed()
    assert bed.join("nobody").join.error == ErrorCode.unknown_member_id
    assert bed.join(session=0.1).join.error == ErrorCode.invalid_session_timeout
    assert bed.join(protocols=()).join.error == ErrorCode.inconsistent_group_protocol
    bed.join(bed.member())
    assert bed.join(protocol_type="connect").join.error == ErrorCode.inconsistent_group_protocol
    assert bed.join(protocols=(("other", b""),)).join.error == ErrorCode.inconsistent_group_protocol


def test_new_member_in_a_stable_group_triggers_a_rebalance() -> None:
    bed = Bed()
    leader, follower, generation = bed.stable_pair()
    view = bed.coordinator.describe(G)
    assert view is not None and view.state is State.STABLE and view.leader == leader
    assert {m.member_id: m.assignment for m in view.members} == {leader: b"A", follower: b"B"}
    assert bed.heartbeat(follower, generation) == ErrorCode.none


def test_follower_rejoin_with_same_metadata_keeps_the_generation() -> None:
    bed = Bed()
    _leader, follower, generation = bed.stable_pair()
    again = bed.join(follower).join
    assert (again.generation, again.members) == (generation, ())
    assert bed.state() is State.STABLE
    changed = bed.join(follower, protocols=(("range", b"new"),))
    assert not changed.results and bed.state() is State.PREPARING


def test_leader_gets_all_members_metadata_and_followers_none() -> None:
    bed = Bed()
    a = bed.member()
    bed.join(a)
    bed.sync(a, 1, {})
    b = bed.member()
    waiting_b = bed.join(b, protocols=(("range", b"b-meta"),))
    waiting_a = bed.join(a)
    assert {m.member_id: m.metadata for m in waiting_a.join.members} == {a: b"meta", b: b"b-meta"}
    assert waiting_b.join.members == ()
    assert waiting_a.join.leader == waiting_b.join.leader == a


def test_protocol_is_chosen_by_vote_among_common_protocols() -> None:
    bed = Bed()
    a = bed.member()
    bed.join(a, protocols=(("cooperative-sticky", b""), ("range", b"")))
    bed.sync(a, 1, {})
    b = bed.member()
    waiting = bed.join(b, protocols=(("range", b""), ("cooperative-sticky", b"")))
    rejoined = bed.join(a, protocols=(("cooperative-sticky", b""), ("range", b"")))
    # One vote each: the tie goes to the leader's preference.
    assert rejoined.join.protocol_name == waiting.join.protocol_name == "cooperative-sticky"


def test_stale_generation_and_unknown_member_in_sync_and_heartbeat() -> None:
    bed = Bed()
    _leader, follower, generation = bed.stable_pair()
    assert bed.sync(follower, generation - 1).sync.error == ErrorCode.illegal_generation
    assert bed.heartbeat(follower, generation - 1) == ErrorCode.illegal_generation
    assert bed.sync("ghost", generation).sync.error == ErrorCode.unknown_member_id
    assert bed.heartbeat("ghost", generation) == ErrorCode.unknown_member_id


def test_a_rebalance_answers_waiting_syncs_with_rebalance_in_progress() -> None:
    bed = Bed()
    a = bed.member()
    bed.join(a)
    bed.sync(a, 1, {})
    b = bed.member()
    bed.join(b)
    bed.join(a)
    waiting = bed.sync(b, 2)  # the leader has not synced yet
    c = bed.member()
    bed.join(c)
    assert waiting.sync.error == ErrorCode.rebalance_in_progress
    assert bed.sync(a, 2, {}).sync.error == ErrorCode.rebalance_in_progress


def test_members_that_miss_the_rebalance_timeout_are_removed() -> None:
    bed = Bed()
    leader, follower, generation = bed.stable_pair()
    newcomer = bed.member(rebalance=5.0)
    waiting = bed.join(newcomer, rebalance=5.0)
    rejoined = bed.join(leader)
    assert not waiting.results and not rejoined.results  # the follower has not rejoined yet
    for _ in range(29):  # the group's rebalance timeout is the largest of its members' (30 s)
        assert bed.heartbeat(follower, generation) == ErrorCode.rebalance_in_progress  # alive, not joining
        bed.advance(1.0)
    assert not waiting.results
    bed.advance(1.0)
    assert rejoined.join.generation == generation + 1
    assert {m.member_id for m in rejoined.join.members} == {leader, newcomer}
    assert bed.heartbeat(follower, generation) == ErrorCode.unknown_member_id


def test_session_timeout_removes_a_silent_member_and_rebalances() -> None:
    bed = Bed()
    leader, _follower, generation = bed.stable_pair()
    for _ in range(3):
        bed.advance(3.0)
        assert bed.heartbeat(leader, generation) == ErrorCode.none
    assert bed.coordinator.next_deadline() is not None
    bed.advance(3.0)  # 12 s since the follower's last heartbeat (session 10 s)
    assert bed.heartbeat(leader, generation) == ErrorCode.rebalance_in_progress
    rejoined = bed.join(leader)
    assert rejoined.join.generation == generation + 1
    assert [m.member_id for m in rejoined.join.members] == [leader]


def test_waiting_members_never_expire_and_the_timer_does_not_spin() -> None:
    bed = Bed()
    a = bed.member(session=2.0)
    bed.join(a, session=2.0)
    bed.sync(a, 1, {})
    b = bed.member(session=2.0)
    waiting = bed.join(b, session=2.0)
    bed.advance(1.5)
    assert bed.heartbeat(a, 1) == ErrorCode.rebalance_in_progress
    bed.advance(1.9)  # b is blocked in JoinGroup: no deadline of its own
    deadline = bed.coordinator.next_deadline()
    assert deadline is not None and deadline > bed.now
    assert not waiting.results
    bed.join(a, session=2.0)
    assert waiting.join.generation == 2


def test_pending_member_id_expires_and_no_longer_holds_the_rebalance() -> None:
    bed = Bed()
    leader, follower, generation = bed.stable_pair()
    pending = bed.member(session=5.0)  # never comes back with its id
    bed.leave([follower])
    rejoined = bed.join(leader)
    assert not rejoined.results  # the pending member may still join
    bed.advance(5.0)
    assert rejoined.join.generation == generation + 1
    assert bed.join(pending).join.error == ErrorCode.unknown_member_id


def test_leave_rebalances_and_the_last_leave_empties_the_group() -> None:
    bed = Bed()
    leader, follower, generation = bed.stable_pair()
    assert bed.leave([leader, "ghost"]) == [ErrorCode.none, ErrorCode.unknown_member_id]
    assert bed.heartbeat(follower, generation) == ErrorCode.rebalance_in_progress
    promoted = bed.join(follower).join
    assert promoted.leader == follower and promoted.generation == generation + 1
    bed.sync(follower, promoted.generation, {})
    assert bed.leave([follower]) == [ErrorCode.none]
    view = bed.coordinator.describe(G)
    assert view is not None and view.state is State.EMPTY and view.members == ()
    assert view.generation == generation + 2


def test_offset_commit_checks_follow_kafka() -> None:
    bed = Bed()
    check = bed.coordinator.validate_commit
    assert check(bed.now, "other", 3, "m") == ErrorCode.illegal_generation  # no such group
    assert check(bed.now, "simple", -1, "") == ErrorCode.none  # creates an Empty group
    a = bed.member()
    bed.join(a)
    assert check(bed.now, G, 1, a) == ErrorCode.rebalance_in_progress  # CompletingRebalance
    bed.sync(a, 1, {})
    assert check(bed.now, G, 1, a) == ErrorCode.none
    assert check(bed.now, G, 0, a) == ErrorCode.illegal_generation
    assert check(bed.now, G, 1, "ghost") == ErrorCode.unknown_member_id
    assert check(bed.now, G, -1, "") == ErrorCode.unknown_member_id  # simple commit, live group
    b = bed.member()
    bed.join(b)
    assert check(bed.now, G, 1, a) == ErrorCode.none  # PreparingRebalance: old generation still valid
    txn = bed.coordinator.validate_txn_commit
    assert txn(G, -1, "") == ErrorCode.none
    assert txn(G, 0, a) == ErrorCode.illegal_generation
    assert txn(G, 1, "ghost") == ErrorCode.unknown_member_id


def test_initial_rebalance_delay_gathers_members_into_one_generation() -> None:
    bed = Bed(initial_delay=0.5)
    ids = [bed.member() for _ in range(3)]
    waiting = [bed.join(ids[0])]
    bed.advance(0.3)
    waiting.append(bed.join(ids[1]))
    bed.advance(0.3)  # extended once: a member joined during the first delay
    waiting.append(bed.join(ids[2]))
    assert not any(w.results for w in waiting)
    bed.advance(0.5)
    assert not any(w.results for w in waiting)  # and once more
    bed.advance(0.5)
    assert {w.join.generation for w in waiting} == {1}
    assert len(waiting[0].join.members) == 3


def test_groups_known_from_offsets_are_empty_and_deletable() -> None:
    bed = Bed()
    bed.coordinator.ensure("stored", generation=7)
    view = bed.coordinator.describe("stored")
    assert view is not None and (view.state, view.generation) == (State.EMPTY, 7)
    a = bed.member()
    bed.join(a)
    assert bed.coordinator.delete(G) == ErrorCode.non_empty_group
    assert bed.coordinator.delete("stored") == ErrorCode.none
    assert bed.coordinator.delete("stored") == ErrorCode.group_id_not_found


def test_offsets_survive_reopening_and_transactions_settle(tmp_path: Path) -> None:
    store = OffsetStore(tmp_path)
    store.commit("g", {("t", 0): Committed(5, 2, "meta"), ("t", 1): Committed(7)})
    store.set_generation("g", 4)
    store.stage(42, "g", {("t", 0): Committed(9)})
    assert store.unstable("g", ("t", 0)) and not store.unstable("g", ("t", 1))
    store.end_transaction(42, commit=False)
    assert store.fetch("g", [("t", 0)]) == {("t", 0): Committed(5, 2, "meta")}
    store.stage(43, "g", {("t", 0): Committed(11)})
    store.end_transaction(43, commit=True)
    store.commit("gone", {("t", 0): Committed(1)})
    store.delete_group("gone")
    store.commit("g", {("dropped", 0): Committed(3)})
    store.forget_topic("dropped")
    store.close()
    reopened = OffsetStore(tmp_path)
    assert reopened.fetch("g", None) == {("t", 0): Committed(11), ("t", 1): Committed(7)}
    assert dict(reopened.groups()) == {"g": 4}
    reopened.close()
    assert len((tmp_path / "kafka-proxy-offsets.jsonl").read_text().splitlines()) == 2  # compacted


def test_producer_epochs_fence_older_instances() -> None:
    epochs = ProducerEpochs()
    assert not epochs.fenced(1, 0, "x")  # unknown: nothing to compare with
    assert epochs.granted("x", 1, 0) == [1]
    assert not epochs.fenced(1, 0, "x")
    assert epochs.granted("x", 1, 1) == [1]
    assert epochs.fenced(1, 0, "x") and epochs.fenced(1, 0) and not epochs.fenced(1, 1)
    assert epochs.granted("x", 2, 0) == [2, 1]  # a new producer id: the old one is fenced too
    assert epochs.fenced(1, 5) and not epochs.fenced(2, 0) and not epochs.fenced(3, 0, "y")
    assert fenced_error(0, 9) == ErrorCode.invalid_producer_epoch
    assert fenced_error(28, 3) == ErrorCode.invalid_producer_epoch
    assert fenced_error(26, 1) == ErrorCode.invalid_producer_epoch
    assert fenced_error(26, 2) == ErrorCode.producer_fenced
    assert fenced_error(22, 4) == ErrorCode.producer_fenced
    assert fenced_error(24, 1) == ErrorCode.invalid_producer_epoch
