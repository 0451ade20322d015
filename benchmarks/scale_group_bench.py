"""ProducerGroup against the real kube-apiserver as the group grows (issue: scale): the operator
and simulated members (``_kube_members``: pods and Leases through the API, no processes), with
10 source partitions per member, 10 -> 100 members (``ORDO_SCALE=long``: to 1,000 members and
10,000 source partitions). Per size:

- the first assignment, a join, a graceful leave (Lease released) and a crash (pod not Ready):
  time until every source partition has an owner again (status lists all of them owned) and
  until the group is settled (every member acknowledged), and the operator's API writes for it,
  counted by kube-apiserver (``apiserver_request_total``, everything but the members' own
  writes);
- steady state with every member renewing its Lease each session / 3: Lease writes per second
  (members x 3 / session) and the operator's CPU and list calls per second while nothing
  changes. The session is 120 s here (the CRD's default is 30 s: 4 x the writes), so that the
  simulator, on the same 2 cores as the API server and the operator, keeps 1,000 Leases fresh.

The SDK's renewal pace is checked with real ``Membership`` objects at a small size.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes

from ordo.group.membership import Membership
from ordo.member_wire import GROUP_LABEL, MemberAssignment
from ordo_testbed.members import SimulatedMembers, api_client, request_counts
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Groups
from ordo_testbed.waiting import wait_for

from ._plot import HERE
from ._result import Result
from ._testbed import full_testbed
from .scale_bench import LONG, growth

MEMBERS = (10, 30, 100) + ((300, 1_000) if LONG else ())
PARTITIONS_PER_MEMBER = 10
SESSION = 120  # a simulator on 2 shared cores renews 1,000 Leases every 40 s, not every 10 s
STEADY_SECONDS = 10.0
CHECK_MEMBERS, CHECK_SESSION = 5, 3  # the renewal pace of real Membership objects
CHANGES = ("first", "join", "leave", "crash")
PNG = HERE / "scale_group_curves.png"
_WRITES = ("POST", "PUT", "PATCH", "DELETE")


@dataclass
class _Size:
    members: int
    owned: dict[str, float]  # change -> s until every partition has an owner
    settled: dict[str, float]  # change -> s until every member acknowledged
    writes: dict[str, int]  # change -> operator API writes
    renewals_per_s: float
    operator_cpu: float  # fraction of one core in steady state
    lists_per_s: float  # the operator's pod list calls per second in steady state
    object_bytes: int  # the ProducerGroup with its status, as JSON


def _operator_writes(
    before: Counter[tuple[str, str, str]], after: Counter[tuple[str, str, str]]
) -> Counter[str]:
    """Writes that are not the simulated members' own (Leases, pods' creation and status), by
    resource."""
    members = {("POST", "pods", ""), ("PATCH", "pods", "status")}
    writes: Counter[str] = Counter()
    for key in after:
        if key[0] in _WRITES and key[1] != "leases" and key not in members:
            writes["/".join(filter(None, key[1:]))] += after[key] - before[key]
    return +writes


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_owned(groups: Groups, name: str, members: int, partitions: int) -> tuple[float, float]:
    """From now: seconds until status shows ``members`` live members owning every partition, and
    until the group is Ready as well."""
    began = time.monotonic()
    owned_at: list[float] = []

    def settled() -> bool:
        status = groups.status(name)
        owned = sum(len(m.get("partitions", [])) for m in status.get("members") or [])
        if status.get("memberCount") != members or owned != partitions:
            return False
        if not owned_at:
            owned_at.append(time.monotonic() - began)
        return any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])

    wait_for(settled, 60 + members / 2, f"{name} settled with {members} members", step=0.05)
    return owned_at[0], time.monotonic() - began


def _measure(api: Any, groups: Groups, operator_pid: int, members: int) -> _Size:
    partitions = members * PARTITIONS_PER_MEMBER
    name = groups.namespace
    sim = SimulatedMembers(api, groups.namespace, name, SESSION)
    owned: dict[str, float] = {}
    settled: dict[str, float] = {}
    writes: dict[str, int] = {}
    try:
        sim.add(f"m-{i:04d}" for i in range(members))
        sim.renew(True)
        changes: dict[str, tuple[Callable[[], None], int]] = {
            "first": (lambda: groups.create(name, partitions, {"app": name}, sessionTimeoutSeconds=SESSION),
                      members),
            "join": (lambda: sim.add(["m-new"]), members + 1),
            "leave": (lambda: sim.leave("m-new"), members),
            "crash": (lambda: sim.crash("m-0000"), members - 1),
        }  # fmt: skip
        for change, (act, expected) in changes.items():
            before = request_counts(api)
            act()
            owned[change], settled[change] = _wait_owned(groups, name, expected, partitions)
            # the status write that showed it settled may still be counting
            by_resource = _operator_writes(before, request_counts(api))
            writes[change] = sum(by_resource.values())
            print(f"  {members:>5} members, {change:5s}: owned {owned[change]:.2f} s, settled "
                  f"{settled[change]:.2f} s, writes {dict(by_resource)}")  # fmt: skip
        size = len(json.dumps(groups.get(name)))
        print(f"  {members:>5} members: the ProducerGroup object {size:,} B (etcd: 1.5 MiB)")
        renewals_per_s, cpu, lists = _steady(api, operator_pid)
        print(f"  {members:>5} members, steady: {renewals_per_s:.1f} Lease writes/s, operator "
              f"{cpu:.0%} of a core, {lists:.1f} pod lists/s")  # fmt: skip
        # gone before the next size: its members' Leases, no longer renewed, would expire during
        # the next size's measurements and the operator would write their revocations then
        groups.delete(name)
        wait_for(lambda: not groups.exists(name), 60 + members / 2, f"{name} deleted")
    finally:
        sim.close()
    return _Size(members, owned, settled, writes, renewals_per_s, cpu, lists, size)


def _steady(api: Any, operator_pid: int) -> tuple[float, float, float]:
    """Lease writes/s, the operator's CPU (fraction of a core) and pod lists/s over a quiet window."""
    before, cpu, began = request_counts(api), _cpu_seconds(operator_pid), time.monotonic()
    threading.Event().wait(STEADY_SECONDS)  # a measuring window, not a wait for anything
    after, spent = request_counts(api), time.monotonic() - began
    leases = sum(after[k] - before[k] for k in after if k[1] == "leases" and k[0] in _WRITES)
    lists = after[("LIST", "pods", "")] - before[("LIST", "pods", "")]
    return leases / spent, (_cpu_seconds(operator_pid) - cpu) / spent, lists / spent


def _sdk_renewals(api: Any, groups: Groups) -> float:
    """Lease writes per second by ``CHECK_MEMBERS`` real ``Membership`` objects of a group with a
    ``CHECK_SESSION`` s session, in steady state (the formula says members x 3 / session)."""
    name = groups.namespace
    core: Any = kubernetes.client.CoreV1Api(api)
    spec = {"nodeName": "ordo-testbed-node", "containers": [{"name": "main", "image": "sdk-member"}]}
    ready = [{"type": "Ready", "status": "True"}]
    memberships: list[Membership] = []
    try:
        for i in range(CHECK_MEMBERS):
            pod = f"sdk-{i}"
            core.create_namespaced_pod(
                name, {"metadata": {"name": pod, "labels": {"app": name, GROUP_LABEL: name}}, "spec": spec}
            )
            core.patch_namespaced_pod_status(pod, name, {"status": {"phase": "Running", "conditions": ready}})
            acks: list[Membership] = []

            def acknowledge(assignment: MemberAssignment | None, acks: list[Membership] = acks) -> None:
                if assignment is not None:
                    wait_for(lambda: acks, 10, "the Membership object")
                    acks[0].ack(assignment.generation)

            acks.append(Membership(api, name, pod, name, acknowledge, lambda: None))
            memberships.append(acks[0])
        groups.create(name, CHECK_MEMBERS, {"app": name}, sessionTimeoutSeconds=CHECK_SESSION)
        groups.wait_settled(name, CHECK_MEMBERS, 60, CHECK_MEMBERS)
        before, began = request_counts(api), time.monotonic()
        threading.Event().wait(STEADY_SECONDS)  # a measuring window
        after, spent = request_counts(api), time.monotonic() - began
        return sum(after[k] - before[k] for k in after if k[1] == "leases" and k[0] in _WRITES) / spent
    finally:
        for membership in memberships:
            membership.release()


def run() -> list[Result]:
    namespaces = [f"scale-{n}" for n in MEMBERS] + ["scale-sdk"]
    with tempfile.TemporaryDirectory() as tmp, full_testbed(Path(tmp)) as (bootstrap, kubeconfig):
        api = api_client(kubeconfig)
        core: Any = kubernetes.client.CoreV1Api(api)
        for namespace in namespaces:
            core.create_namespace({"metadata": {"name": namespace}})
        operator = OperatorProcess(
            kubeconfig, bootstrap, namespaces=namespaces, log_path=Path(tmp) / "op.log"
        )
        operator.start()
        custom = kubernetes.client.CustomObjectsApi(api)
        try:
            assert operator.pid is not None
            sdk_rate = _sdk_renewals(api, Groups(custom, "scale-sdk"))
            print(f"  {CHECK_MEMBERS} SDK members, session {CHECK_SESSION} s: {sdk_rate:.2f} Lease writes/s")
            sizes = [_measure(api, Groups(custom, f"scale-{n}"), operator.pid, n) for n in MEMBERS]
        finally:
            operator.stop()
    _plot(sizes)
    return _results(sizes, sdk_rate)


def _results(sizes: list[_Size], sdk_rate: float) -> list[Result]:
    top = sizes[-1]
    members = [s.members for s in sizes]
    label = f"{top.members:,} simulated members, {top.members * PARTITIONS_PER_MEMBER:,} source partitions"
    results = [
        Result.absolute(
            f"Lease writes/s of {CHECK_MEMBERS} SDK members, session {CHECK_SESSION} s "
            f"(formula members x 3 / session: {CHECK_MEMBERS * 3 / CHECK_SESSION:g})",
            sdk_rate,
            "/s",
        )
    ]
    for change in CHANGES:
        k = growth(members, [s.settled[change] for s in sizes])
        results.append(
            Result.absolute(
                f"ProducerGroup {change}: every partition owned again / settled, {label} "
                f"(settled O(n^{k:.2f}); owned at {top.owned[change]:.2f} s)",
                top.settled[change],
                "s",
            )
        )
        k = growth(members, [max(1, s.writes[change]) for s in sizes])
        results.append(
            Result.absolute(
                f"operator API writes for a {change}, {label} (O(n^{k:.2f}))", top.writes[change], ""
            )
        )
    k = growth(members, [max(s.operator_cpu, 1e-3) for s in sizes])
    results += [
        Result.absolute(
            f"Lease writes/s in steady state, {label} (session {SESSION} s)", top.renewals_per_s, "/s"
        ),
        Result.absolute(
            f"ProducerGroup object with its status, {label}", top.object_bytes, "B", "<= 1572864"
        ),
        Result.absolute(
            f"operator CPU in steady state (renewals only), {label} (O(n^{k:.2f}))",
            top.operator_cpu * 100,
            "% of a core",
            "<= 50 %",
        ),
    ]
    return results


def _plot(sizes: list[_Size]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    members = [s.members for s in sizes]
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(13, 4.2))
    for change in CHANGES:
        left.plot(members, [s.settled[change] for s in sizes], marker="o", label=change)
        middle.plot(members, [max(1, s.writes[change]) for s in sizes], marker="o", label=change)
    left.set(xscale="log", yscale="log", xlabel="members (10 source partitions each)", ylabel="s",
             title="change -> group settled (real kube-apiserver)")  # fmt: skip
    middle.set(xscale="log", yscale="log", xlabel="members", ylabel="writes",
               title="operator API writes per change")  # fmt: skip
    right.plot(members, [s.operator_cpu * 100 for s in sizes], marker="o", label="operator CPU, % of a core")
    right.plot(members, [s.renewals_per_s for s in sizes], marker="o", label="Lease writes/s")
    right.plot(members, [s.lists_per_s for s in sizes], marker="o", label="operator pod lists/s")
    right.set(xscale="log", yscale="log", xlabel="members", title=f"steady state (session {SESSION} s)")
    for axes in (left, middle, right):
        axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(PNG, dpi=110)
    plt.close(figure)
