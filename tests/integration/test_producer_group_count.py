"""Many ProducerGroups on one operator: each group's daemon holds a thread of kopf's pool for as
long as the group lives, so the operator sizes the pool (``ORDO_MAX_WORKERS``). With kopf's
default (CPUs + 4) the groups past it were never served. Members are simulated through the API
(``ordo_testbed.members``): this is about the operator, not the SDK."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.members import SimulatedMembers
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Groups

pytestmark = pytest.mark.testbed

KOPF_DEFAULT_THREADS = min(32, (os.cpu_count() or 1) + 4)


def test_more_groups_than_kopfs_default_threads_are_all_served(
    kube: Kube, operator_process: Callable[..., OperatorProcess]
) -> None:
    count = KOPF_DEFAULT_THREADS + 2
    operator_process().start()
    groups = Groups(kube.custom, kube.namespace)
    members = [SimulatedMembers(kube.api, kube.namespace, f"g{i}", session_seconds=30) for i in range(count)]
    try:
        for i, sim in enumerate(members):
            sim.add([f"g{i}-member"])
            sim.renew(True)  # Leases renewed as members do: a slow run does not see them expire
            groups.create(f"g{i}", 2, {"app": f"g{i}"})
        for i in range(count):
            groups.wait_settled(f"g{i}", 1, 60, 2)
    finally:
        for sim in members:
            sim.close()
