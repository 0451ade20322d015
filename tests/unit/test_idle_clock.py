"""The member's idle limit (KIP-509's alive()), without servers."""

from ordo.group.idle import IdleClock


def test_the_clock_runs_only_while_the_member_owns_partitions() -> None:
    clock = IdleClock(limit=10)
    assert clock.left(1_000) is None, "a member with nothing to do is never idle"
    clock.touch(1_000)
    assert clock.left(1_000) is None, "alive() does not start it either"
    clock.start(100)
    assert clock.left(105) == 5
    clock.start(104)
    assert clock.left(105) == 5, "taking more partitions does not restart a running clock"
    clock.stop()
    assert clock.left(200) is None


def test_alive_and_commits_restart_it_and_the_limit_is_what_counts() -> None:
    clock = IdleClock(limit=10)
    clock.start(0)
    clock.touch(8)
    assert clock.left(17) == 1 and clock.left(18) == 0
    clock.touch(3)
    assert clock.left(18) == 0, "a late touch with an older time moves nothing back"
    clock.limit = 30
    assert clock.left(18) == 20, "a new maxIdleSeconds applies to the running clock"


def test_a_shorter_limit_counts_from_when_the_member_took_it() -> None:
    """maxIdleSeconds shortened live: a member idle within the old limit is not stepped out by the
    change itself; it gets the new limit from the change, and never more than the old deadline."""
    clock = IdleClock(limit=300)
    clock.start(0)
    clock.change_limit(30, now=50)  # idle 50 s, fine under 300 s, already past 30 s
    assert clock.left(50) == 30 and clock.left(80) == 0
    near = IdleClock(limit=300)
    near.start(0)
    near.change_limit(30, now=290)  # 10 s left under the old limit: the old deadline stays
    assert near.left(290) == 10
    fresh = IdleClock(limit=300)
    fresh.start(0)
    fresh.touch(100)
    fresh.change_limit(30, now=100)
    assert fresh.left(100) == 30, "an active member: the new limit from its last activity"
    longer = IdleClock(limit=10)
    longer.start(0)
    longer.change_limit(60, now=8)
    assert longer.left(8) == 52, "a longer limit applies at once"
    idle = IdleClock(limit=300)
    idle.change_limit(30, now=50)
    assert idle.left(50) is None, "a member that owns nothing keeps no clock"
