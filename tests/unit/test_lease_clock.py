"""A member's own judgement of its Lease (issue 35, item 5) — no servers."""

from ordo.group.lapse import LAPSE_FRACTION, LeaseClock


def test_a_member_counts_on_its_lease_for_part_of_the_session_from_when_a_renewal_began() -> None:
    clock = LeaseClock()
    assert not clock.lapsed(10**9), "no session known yet (nothing owned): never"
    clock.renewed(started=100, session=10)
    assert not clock.lapsed(100 + 10 * LAPSE_FRACTION)
    assert clock.lapsed(100 + 10 * LAPSE_FRACTION + 0.001), "stopped past it: the partitions may have moved"
    assert LAPSE_FRACTION < 1, "before the operator's judgement (renewTime + session)"


def test_a_new_session_counts_from_the_renewal_it_causes() -> None:
    clock = LeaseClock()
    clock.renewed(started=0, session=30)
    assert not clock.lapsed(20), "the session shrank to 3 s meanwhile: the Lease still says 30 s"
    clock.renewed(started=20, session=3)
    assert clock.lapsed(20 + 3)
