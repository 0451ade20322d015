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
