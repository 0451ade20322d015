"""plans/replicas.py: the topic watch works only on the replica kopf lets work, by kopf's own rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ordo_operator.plans.replicas import is_active, peers_of

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _status(**peers: tuple[int, float]) -> dict[str, dict[str, object]]:
    """identity -> (priority, seconds since its last keepalive), with kopf's 60 s lifetime."""
    return {
        name: {"priority": priority, "lifetime": 60, "lastseen": (NOW - timedelta(seconds=ago)).isoformat()}
        for name, (priority, ago) in peers.items()
    }


def test_the_highest_priority_live_replica_works_and_the_others_stand_by() -> None:
    peers = peers_of(_status(a=(200, 5), b=(100, 5)), NOW)
    assert is_active(peers, "a", 200, NOW)
    assert not is_active(peers, "b", 100, NOW)


def test_a_standby_works_once_the_higher_replica_is_dead_by_its_lifetime() -> None:
    killed = peers_of(_status(a=(200, 61), b=(100, 1)), NOW)  # kill -9: no keepalive for 61 s
    assert is_active(killed, "b", 100, NOW)
    assert not is_active(peers_of(_status(a=(200, 59), b=(100, 1)), NOW), "b", 100, NOW)


def test_equal_priorities_pause_both_as_kopf_does_and_a_replica_alone_works() -> None:
    same = peers_of(_status(a=(100, 1), b=(100, 1)), NOW)
    assert not is_active(same, "a", 100, NOW) and not is_active(same, "b", 100, NOW)
    assert is_active(peers_of(_status(a=(100, 1)), NOW), "a", 100, NOW)
    assert is_active(peers_of({}, NOW), "a", 100, NOW), "not listed yet: nobody outranks it"


def test_a_peer_without_lastseen_or_lifetime_is_read_as_kopf_reads_it() -> None:
    (peer,) = peers_of({"a": {"priority": 7}}, NOW)
    assert peer.priority == 7 and peer.deadline == NOW + timedelta(seconds=60)
