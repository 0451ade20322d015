"""Lease events that wake a group's pass: changes of holder or acknowledgement, not renewals."""

from ordo_operator.plans.wakeups import LeaseWakeups


def test_only_a_new_holder_acknowledgement_or_lease_wakes_the_group() -> None:
    wakeups = LeaseWakeups()
    assert wakeups.wakes("ns", "m-1", "m-1", None, gone=False)  # a new member's Lease
    assert not wakeups.wakes("ns", "m-1", "m-1", None, gone=False)  # renewed: renewTime only
    assert wakeups.wakes("ns", "m-1", "m-1", "3", gone=False)  # acknowledged generation 3
    assert not wakeups.wakes("ns", "m-1", "m-1", "3", gone=False)
    assert wakeups.wakes("ns", "m-1", None, "3", gone=False)  # released: the member left
    assert wakeups.wakes("ns", "m-1", "m-1", "3", gone=False)  # and held again
    assert wakeups.wakes("other", "m-1", "m-1", "3", gone=False)  # another namespace's Lease


def test_a_deleted_lease_wakes_the_group_and_is_forgotten() -> None:
    wakeups = LeaseWakeups()
    wakeups.wakes("ns", "m-1", "m-1", "1", gone=False)
    assert wakeups.wakes("ns", "m-1", "m-1", "1", gone=True)
    assert wakeups.wakes("ns", "m-1", "m-1", "1", gone=False)  # created again: new to us
