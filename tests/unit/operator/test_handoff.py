from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ordo.member_wire import MemberAssignment
from ordo_operator.plans.handoff import HandoffPlan, Member, ShrinkBlocked, is_live, plan_handoff


class Group:
    """A tiny world: members with annotations and acks, the operator applying each plan."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.generation = 0
        self.annotations: dict[str, MemberAssignment] = {}
        self.acked: dict[str, int] = {}
        self.live: set[str] = set()

    def members(self) -> list[Member]:
        names = self.live | set(self.annotations)
        return [Member(n, n in self.live, self.annotations.get(n), self.acked.get(n)) for n in sorted(names)]

    def step(self) -> HandoffPlan:
        plan = plan_handoff("g", self.partitions, self.members(), self.generation)
        self.annotations.update(plan.writes)
        self.generation = plan.generation
        return plan

    def ack(self, name: str) -> None:
        if name in self.annotations:
            self.acked[name] = self.annotations[name].generation

    def owned(self, name: str) -> list[int]:
        return list(self.annotations[name].partitions) if name in self.annotations else []

    def producing(self) -> dict[int, list[str]]:
        """Who may be producing each partition: owners, and revokers that have not acknowledged."""
        result: dict[int, list[str]] = {}
        for m in self.members():
            if m.live:
                for p in (*m.owned, *m.revoking):
                    result.setdefault(p, []).append(m.name)
        return result


def test_first_member_gets_every_partition() -> None:
    g = Group(4)
    g.live = {"a"}
    plan = g.step()
    assert g.owned("a") == [0, 1, 2, 3] and plan.generation == 1 and not plan.waiting


def test_joining_member_waits_for_the_old_owner_to_acknowledge() -> None:
    g = Group(4)
    g.live = {"a"}
    g.step()
    g.ack("a")
    g.live = {"a", "b"}
    plan = g.step()
    assert g.owned("a") == [0, 1] and g.annotations["a"].revoking == (2, 3)
    assert g.owned("b") == [] and plan.waiting == {2: "a", 3: "a"}
    assert g.step().writes == {}, "nothing changes until a acknowledges"
    g.ack("a")
    plan = g.step()
    assert g.owned("b") == [2, 3] and plan.unassigned == [] and not plan.waiting


def test_a_dead_member_loses_its_partitions_at_once() -> None:
    g = Group(6)
    g.live = {"a", "b", "c"}
    g.step()
    dead = g.owned("b")
    g.live = {"a", "c"}
    plan = g.step()
    assert sorted(g.owned("a") + g.owned("c")) == list(range(6)) and not plan.waiting
    assert g.annotations["b"].partitions == (), "the dead pod's annotation is cleared too"
    assert set(dead) <= set(g.owned("a") + g.owned("c"))


def test_standby_members_get_an_empty_assignment_and_take_over() -> None:
    g = Group(2)
    g.live = {"a", "b", "c"}
    g.step()
    assert [g.owned(n) for n in "abc"] == [[0], [1], []]
    assert g.annotations["c"].generation == 1, "standby members are told they are standby"
    g.live = {"b", "c"}
    g.step()
    assert g.owned("c") == [0]


def test_shrinking_below_owned_partitions_is_blocked_and_changes_nothing() -> None:
    g = Group(4)
    g.live = {"a"}
    g.step()
    g.partitions = 2
    with pytest.raises(ShrinkBlocked, match=r"would drop partitions \[2, 3\]"):
        g.step()


def test_growing_assigns_the_new_partitions() -> None:
    g = Group(2)
    g.live = {"a", "b"}
    g.step()
    g.partitions = 4
    g.step()
    assert sorted(g.owned("a") + g.owned("b")) == [0, 1, 2, 3]


def test_liveness_needs_ready_not_deleting_and_a_fresh_lease() -> None:
    now = datetime(2026, 11, 22, tzinfo=UTC)
    session = timedelta(seconds=30)
    assert is_live(True, False, now - timedelta(seconds=29), now, session)
    assert not is_live(True, False, now - timedelta(seconds=31), now, session)
    assert not is_live(False, False, now, now, session)
    assert not is_live(True, True, now, now, session)
    assert not is_live(True, False, None, now, session)


events = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.sampled_from("abcdef")),
        st.tuples(st.just("die"), st.sampled_from("abcdef")),
        st.tuples(st.just("ack"), st.sampled_from("abcdef")),
    ),
    max_size=40,
)


@given(st.integers(1, 12), events)
def test_no_partition_ever_has_two_producers_and_handoffs_converge(partitions: int, script: list) -> None:  # type: ignore[type-arg]
    g = Group(partitions)
    for kind, name in script:
        if kind == "join":
            g.live.add(name)
        elif kind == "die":
            g.live.discard(name)
        else:
            g.ack(name)
        g.step()
        assert all(len(owners) == 1 for owners in g.producing().values()), g.producing()
    for _ in range(4):  # everyone acknowledges: the group settles, balanced
        for name in list(g.live):
            g.ack(name)
        plan = g.step()
    if g.live:
        sizes = [len(g.owned(n)) for n in g.live]
        assert sorted(p for n in g.live for p in g.owned(n)) == list(range(partitions))
        assert max(sizes) - min(sizes) <= 1 and not plan.waiting and plan.writes == {}
