"""The pods a ProducerGroup's pass reads come from kopf's watches, not from a LIST per pass: a pod
relabelled out of the selector leaves the group, relabelled back it joins again. Members are
simulated through the API (``ordo_testbed.members``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.members import SimulatedMembers
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Groups

pytestmark = pytest.mark.testbed


def test_a_pod_follows_its_labels_in_and_out_of_the_group(
    kube: Kube, operator_process: Callable[..., OperatorProcess]
) -> None:
    operator_process().start()
    groups = Groups(kube.custom, kube.namespace)
    sim = SimulatedMembers(kube.api, kube.namespace, "g", session_seconds=30)
    try:
        sim.add(["m-0", "m-1"])
        sim.renew(True)  # Leases renewed as members do: a slow run does not see them expire
        groups.create("g", 4, {"app": "g"})
        groups.wait_settled("g", 2, 30, 4)

        def relabel(app: str) -> None:
            kube.core.patch_namespaced_pod("m-1", kube.namespace, {"metadata": {"labels": {"app": app}}})

        relabel("elsewhere")
        assert [m["pod"] for m in groups.wait_settled("g", 1, 30, 4)["members"]] == ["m-0"]
        relabel("g")
        groups.wait_settled("g", 2, 30, 4)
    finally:
        sim.close()
