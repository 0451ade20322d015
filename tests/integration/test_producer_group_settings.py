"""Changing a live ProducerGroup's settings, as a user does it: with the real kubectl against the
testbed's kube-apiserver (the CRDs of crds/, their CEL rules), and under running members."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client import CoordinationV1Api

from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube, kubectl
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.pods import PodSet
from ordo_testbed.resources import Groups, group_member_argv
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed


def group(**spec: object) -> str:
    return json.dumps({
        "apiVersion": "ordo.dev/v1alpha1", "kind": "ProducerGroup", "metadata": {"name": "copy"},
        "spec": {"sourcePartitions": 2, "selector": {"matchLabels": {"app": "copy"}}, **spec},
    })  # fmt: skip


def test_exactly_once_and_the_checkpoint_topic_are_refused_on_a_live_group_with_what_to_do(
    kube: Kube,
) -> None:
    created = kubectl(kube, "apply", "-f", "-", stdin=group())
    assert created.returncode == 0, created.stderr
    groups = Groups(kube.custom, kube.namespace)
    assert groups.get("copy")["spec"]["maxIdleSeconds"] == 300, "the default"

    flipped = kubectl(kube, "apply", "-f", "-", stdin=group(exactlyOnce=False))
    assert flipped.returncode != 0, flipped.stdout
    assert "spec.exactlyOnce: Invalid value" in flipped.stderr
    assert "exactlyOnce cannot change on a live group: delete the ProducerGroup" in flipped.stderr
    moved = kubectl(
        kube, "patch", "pg", "copy", "--type=merge", "-p", '{"spec": {"checkpointTopic": "other"}}'
    )
    assert moved.returncode != 0, moved.stdout
    assert "checkpointTopic cannot change on a live group" in moved.stderr
    spec = groups.get("copy")["spec"]
    assert (spec["exactlyOnce"], spec["checkpointTopic"]) == (True, "__ordo_checkpoints"), "nothing changed"

    # the timeouts change live, within their bounds
    assert (
        kubectl(kube, "apply", "-f", "-", stdin=group(maxIdleSeconds=60, sessionTimeoutSeconds=10)).returncode
        == 0
    )
    assert groups.get("copy")["spec"]["maxIdleSeconds"] == 60
    zero = kubectl(kube, "apply", "-f", "-", stdin=group(maxIdleSeconds=0))
    assert zero.returncode != 0 and "spec.maxIdleSeconds" in zero.stderr

    # what the message says to do works: delete, then create with the new value
    assert kubectl(kube, "delete", "pg", "copy").returncode == 0
    again = kubectl(kube, "apply", "-f", "-", stdin=group(exactlyOnce=False))
    assert again.returncode == 0, again.stderr
    assert groups.get("copy")["spec"]["exactlyOnce"] is False


OLD_SESSION, NEW_SESSION = 30, 3


def _lease(kube: Kube, name: str) -> Any:
    return CoordinationV1Api(kube.api).read_namespaced_lease(name, kube.namespace)


def _lease_ages(kube: Kube, names: list[str]) -> dict[str, float]:
    """Seconds since each member's Lease was renewed, by this machine's clock (the members' too)."""
    now = datetime.now(UTC)
    return {n: (now - _lease(kube, n).spec.renew_time).total_seconds() for n in names}


def _taken_by_all(kube: Kube, names: list[str], generation: int) -> bool:
    """Every member renews under the new session and acknowledged a generation carrying it."""
    for name in names:
        lease = _lease(kube, name)
        acked = int((lease.metadata.annotations or {}).get("ordo.dev/acked-generation", -1))
        if lease.spec.lease_duration_seconds != NEW_SESSION or acked < generation:
            return False
    return True


def test_shortening_the_session_under_live_members_moves_no_partition_and_then_holds(
    kafka: KafkaHandle,
    kube: Kube,
    pods: PodSet,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
) -> None:
    """Issue 35, item 4. Members renew their Leases every 10 s (a 30 s session) when the session
    drops to 3 s: judged by it at once they would look dead and their partitions would move. None
    may move for the change itself; afterwards a stopped member is judged by the 3 s session."""
    operator_process().start()
    topic = kafka.create_topic(4, prefix="data")
    groups = Groups(kube.custom, kube.namespace)
    groups.create(
        "copy",
        4,
        {"app": "copy"},
        sessionTimeoutSeconds=OLD_SESSION,
        checkpointTopic=kafka.topic("checkpoints"),
    )
    argv = group_member_argv(
        kafka.bootstrap, topic, records=100_000, batch=10, rate=5, epoch_topic=log_topics[0],
        registry_topic=log_topics[1],
    )  # fmt: skip
    names = ["m-0", "m-1"]
    members = {
        n: pods.start(n, argv, labels={"app": "copy"}, env={"ORDO_GROUP": "copy"}, grace=10) for n in names
    }
    settled = groups.wait_settled("copy", 2, 90, 4)
    owners, generation = groups.owners("copy"), settled["generation"]
    assert sorted(len(p) for p in owners.values()) == [2, 2]
    events_before = {e.metadata.name for e in kube.events()}
    events_of_members = {n: len(pod.events("rebalance")) for n, pod in members.items()}

    # a moment when a Lease is older than the new session (and its next renewal some seconds off):
    # judged by 3 s at once, its member would be dead
    wait_for(
        lambda: any(
            NEW_SESSION + 0.5 < age < OLD_SESSION / 3 - 1.5 for age in _lease_ages(kube, names).values()
        ),
        2 * OLD_SESSION,
        "a Lease older than the new session",
    )
    groups.patch_spec("copy", sessionTimeoutSeconds=NEW_SESSION)
    wait_for(lambda: _taken_by_all(kube, names, generation + 1), 30, "both members to take the new session")
    after = groups.wait_settled("copy", 2, 30, 4)

    assert groups.owners("copy") == owners, "the change moved partitions"
    assert after["generation"] == generation + 1, "one generation: the settings' own"
    new_events = [e for e in kube.events() if e.metadata.name not in events_before]
    assert [e.message for e in new_events if e.reason == "MemberLost"] == []
    rebalanced = [e.message for e in new_events if e.reason == "Rebalanced"]
    expected = ", ".join(f"{pod}={partitions}" for pod, partitions in sorted(owners.items()))
    assert rebalanced == [f"generation {generation + 1}: {expected}"], rebalanced
    for name, pod in members.items():
        changes = pod.events("rebalance")[events_of_members[name] :]
        assert changes and all(not (e["assigned"] or e["revoked"] or e["lost"]) for e in changes), changes
    print(f"partition moves caused by the change: 0; generations {generation} -> {after['generation']}")

    # the new session is in force: a stopped member (its pod stays Ready) is dead 3 s after its
    # last renewal, where the old session would have taken 30 s
    members["m-1"].pause()
    stopped = time.monotonic()
    try:
        wait_for(lambda: groups.owners("copy").get("m-0") == [0, 1, 2, 3], OLD_SESSION / 2, "m-0 to take all")
    finally:
        members["m-1"].resume()
    took = time.monotonic() - stopped
    print(f"a member stopped after the change lost its partitions {took:.1f}s later")
    assert took < OLD_SESSION / 2
