"""Changing a live ProducerGroup's settings, as a user does it: with the real kubectl against the
testbed's kube-apiserver (the CRDs of crds/, their CEL rules)."""

from __future__ import annotations

import json

import pytest

from ordo_testbed.kube.fixtures import Kube, kubectl
from ordo_testbed.resources import Groups

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
