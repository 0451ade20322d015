"""WatchCache: the pods and Leases a ProducerGroup pass reads, fed by list+watch — no servers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ordo.api.common import LabelSelector
from ordo.member_wire import ACK_ANNOTATION, ASSIGNMENT_ANNOTATION, GROUP_LABEL
from ordo_operator.plans.group import LeaseView, PodView, fresh_leases
from ordo_operator.plans.objects import lease_listed, pod_listed
from ordo_operator.plans.watch_cache import Listed, WatchCache, revision_of

APP_X = LabelSelector.model_validate({"matchLabels": {"app": "x"}})
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def _pod(name: str, revision: int, app: str = "x", ready: bool = True) -> Listed[PodView]:
    return Listed(name, {"app": app}, revision, PodView(name, ready=ready, deleting=False))


def _lease(name: str, revision: int, renewed: datetime, acked: int | None = None) -> Listed[LeaseView]:
    return Listed(name, {GROUP_LABEL: "g"}, revision, LeaseView(name, name, renewed, acked))


def test_events_replace_older_views_and_never_newer_ones() -> None:
    cache: WatchCache[PodView] = WatchCache()
    assert cache.put("ns", _pod("a", 5, ready=False), now=0)
    assert cache.put("ns", _pod("a", 7), now=0)
    assert not cache.put("ns", _pod("a", 6, ready=False), now=0)  # a LIST older than the event
    assert cache.select("ns", APP_X.matches)["a"].ready
    assert cache.select("other", APP_X.matches) == {}


def test_a_pod_leaves_and_enters_the_selector_with_its_labels() -> None:
    cache: WatchCache[PodView] = WatchCache()
    cache.put("ns", _pod("a", 1), now=0)
    cache.put("ns", _pod("b", 2), now=0)
    before = cache.changes("ns")
    assert cache.put("ns", _pod("a", 3, app="y"), now=0)
    assert set(cache.select("ns", APP_X.matches)) == {"b"}
    assert cache.changes("ns") > before
    cache.put("ns", _pod("a", 4), now=0)
    assert set(cache.select("ns", APP_X.matches)) == {"a", "b"}


def test_a_deleted_object_is_gone_and_an_older_list_cannot_bring_it_back() -> None:
    cache: WatchCache[PodView] = WatchCache(tombstone_seconds=60)
    cache.put("ns", _pod("a", 5), now=0)
    assert cache.delete("ns", "a", 8, now=0)
    assert not cache.delete("ns", "a", 8, now=0)  # already gone
    cache.relisted("ns", APP_X.matches, [_pod("a", 5)], list_revision=7, now=1)  # began before the delete
    assert cache.select("ns", APP_X.matches) == {}
    assert cache.put("ns", _pod("a", 9), now=2)  # created again
    assert set(cache.select("ns", APP_X.matches)) == {"a"}


def test_tombstones_expire_with_or_without_lists() -> None:
    cache: WatchCache[PodView] = WatchCache(tombstone_seconds=60)
    cache.delete("ns", "a", 8, now=100)
    cache.delete("ns", "b", 8, now=150)
    cache.relisted("ns", APP_X.matches, [], list_revision=9, now=161)
    assert cache.put("ns", _pod("a", 5), now=161)  # no longer blocked (no LIST takes a minute)
    assert not cache.put("ns", _pod("b", 5), now=161)
    cache.delete("ns", "c", 8, now=222)  # deletions alone prune too: no group may ever LIST
    assert cache.put("ns", _pod("b", 5), now=222)


def test_a_delete_older_than_what_we_hold_is_ignored() -> None:
    cache: WatchCache[PodView] = WatchCache()
    cache.put("ns", _pod("a", 9), now=0)  # created again, seen before the old copy's deletion
    assert not cache.delete("ns", "a", 8, now=0)
    assert set(cache.select("ns", APP_X.matches)) == {"a"}


def test_a_relist_drops_what_it_lacks_unless_we_hold_a_newer_copy() -> None:
    cache: WatchCache[PodView] = WatchCache()
    cache.put("ns", _pod("missed", 3), now=0)  # its DELETED event was missed
    cache.put("ns", _pod("late", 12), now=0)  # created after the LIST was read
    cache.put("ns", _pod("unselected", 4, app="y"), now=0)  # another group's: not in this LIST
    before = cache.changes("ns")
    cache.relisted("ns", APP_X.matches, [_pod("listed", 10)], list_revision=10, now=0)
    assert set(cache.select("ns", APP_X.matches)) == {"listed", "late"}
    assert set(cache.select("ns", lambda labels: True)) == {"listed", "late", "unselected"}
    assert cache.changes("ns") > before


def test_unordered_resource_versions_are_taken_as_they_come() -> None:
    cache: WatchCache[PodView] = WatchCache()
    assert revision_of("17") == 17 and revision_of("a7") is None and revision_of(None) is None
    cache.put("ns", _pod("a", 5), now=0)
    assert cache.put("ns", Listed("a", {"app": "x"}, None, PodView("a", ready=False, deleting=False)), now=0)
    assert not cache.select("ns", APP_X.matches)["a"].ready


def test_a_lease_renewal_alone_changes_nothing_significant_but_its_view_is_current() -> None:
    cache: WatchCache[LeaseView] = WatchCache(significant=lambda lease: (lease.holder, lease.acked))
    assert cache.put("ns", _lease("m-1", 1, NOW), now=0)  # a new member's Lease
    before = cache.changes("ns")
    assert not cache.put("ns", _lease("m-1", 2, NOW + timedelta(seconds=5)), now=0)  # renewed
    assert cache.changes("ns") == before
    assert cache.select("ns", lambda labels: True)["m-1"].renewed == NOW + timedelta(seconds=5)
    assert cache.put("ns", _lease("m-1", 3, NOW + timedelta(seconds=5), acked=3), now=0)  # acknowledged
    assert cache.changes("ns") == before + 1


def test_lease_expiry_is_judged_from_the_cached_renew_time() -> None:
    cache: WatchCache[LeaseView] = WatchCache(significant=lambda lease: (lease.holder, lease.acked))
    cache.put("ns", _lease("m-1", 1, NOW), now=0)
    cache.put("ns", _lease("m-2", 2, NOW - timedelta(seconds=8)), now=0)
    leases = cache.select("ns", lambda labels: True)
    assert fresh_leases(leases, NOW, 10) == {"m-1", "m-2"}
    assert fresh_leases(leases, NOW + timedelta(seconds=3), 10) == {"m-1"}  # m-2 expired meanwhile
    cache.put("ns", _lease("m-2", 3, NOW + timedelta(seconds=3)), now=0)  # renewed after expiring
    assert fresh_leases(cache.select("ns", lambda labels: True), NOW + timedelta(seconds=3), 10) == {
        "m-1",
        "m-2",
    }


def test_objects_as_kube_apiserver_sends_them() -> None:
    pod = pod_listed(
        {
            "metadata": {
                "name": "m-1",
                "resourceVersion": "41",
                "labels": {"app": "x"},
                "annotations": {ASSIGNMENT_ANNOTATION: "{}"},
            },
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    assert pod == Listed("m-1", {"app": "x"}, 41, PodView("m-1", ready=True, deleting=False, assignment="{}"))
    lease = lease_listed(
        {
            "metadata": {"name": "m-1", "resourceVersion": "42", "annotations": {ACK_ANNOTATION: "3"}},
            "spec": {"holderIdentity": "m-1", "renewTime": "2026-11-26T12:00:00.000000Z"},
        }
    )
    assert lease == Listed("m-1", {}, 42, LeaseView("m-1", "m-1", NOW, 3))
