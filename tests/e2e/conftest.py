"""The e2e suite runs under ``make e2e`` (ORDO_E2E=1), as root on Linux, where Docker's and
containerd's Debian packages are installed (``scripts/e2e-deps``); elsewhere each test is skipped
with the reason. The ``cluster`` fixture builds and starts everything, each step timed."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ordo_testbed.kube.binaries import node_binaries
from ordo_testbed.waiting import wait_for

from .cluster import Cluster, connect, install_chart, install_kafka
from .images import Images, build_all, load_all
from .node import Node, cache_dir, ensure_docker, stop_kept, unmount_under
from .steps import JOURNAL

KEEP = bool(os.environ.get("ORDO_E2E_KEEP"))
NEEDED = ("dockerd", "containerd", "runc", "ctr", "debootstrap", "iptables", "ip", "gcc", "kubectl", "java")


def unavailable_reason() -> str | None:
    """Why the e2e suite cannot run here, or None when it can."""
    if not os.environ.get("ORDO_E2E"):
        return "run it with `make e2e` (ORDO_E2E=1)"
    if os.geteuid() != 0:
        return "needs root (a bridge, iptables rules, containerd)"
    missing = [tool for tool in NEEDED if shutil.which(tool) is None]
    if missing or not Path("/usr/lib/cni/bridge").exists():
        return f"missing {missing or 'the CNI plugins'}: run scripts/e2e-deps"
    return None


def pytest_configure(config: pytest.Config) -> None:
    JOURNAL.config = config


# The suite's last tests, whichever file comes after test_cluster.py: the uninstall ends the cluster's
# use (test_spark.py's apps need the operator and the namespace it removes).
LAST = ("test_uninstall_in_the_documented_order_leaves_nothing_hanging",
        "test_images_and_node_programs_are_cached_for_the_next_run")  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    e2e = [item for item in items if "tests/e2e" in str(item.fspath)]
    if not e2e:
        return
    items[:] = [i for i in items if i.name not in LAST] + [i for i in items if i.name in LAST]
    reason = unavailable_reason()
    for item in e2e:
        item.add_marker(pytest.mark.e2e)
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"e2e: {reason}"))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if JOURNAL.steps:
        for line in JOURNAL.summary():
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def images() -> Images:
    return Images()


@pytest.fixture(scope="session")
def machine_lock() -> Iterator[None]:
    """One e2e run at a time on a machine: the images' tags, the node's containerd and the
    cluster's state are the machine's (a second run stopped the first's containerd while it
    imported images: ``ctr: failed to ingest ... EOF``). A second run waits for the first."""
    with open(cache_dir() / "e2e.lock", "w") as held:

        def taken() -> bool:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        if not taken():
            with JOURNAL.step("waiting for another e2e run on this machine to end"):
                wait_for(taken, 2400, "another e2e run on this machine to end", step=1.0)
        yield


@pytest.fixture(scope="session")
def cluster(machine_lock: None, images: Images) -> Iterator[Cluster]:
    state = cache_dir() / "cluster"
    with JOURNAL.step("Docker engine") as notes:
        notes.append(ensure_docker())
    with JOURNAL.step("kubelet, kube-scheduler, kube-proxy, helm (testbed/kube-node/build)") as notes:
        notes.append("built" if not _node_built() else "cached")
        programs = node_binaries()
    build_all(images, JOURNAL)
    stop_kept(state)
    unmount_under(state)
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    node = Node(state, images, detached=KEEP)
    try:
        with JOURNAL.step("pod network and the node's containerd"):
            node.network()
            node.start_containerd()
        load_all(images, JOURNAL)
        with JOURNAL.step("control plane (etcd, kube-apiserver, kube-controller-manager)"):
            node.start_control_plane()
        with JOURNAL.step("node (kubelet, kube-proxy, kube-scheduler) Ready"):
            node.start_node()
        made = connect(node, images, programs["helm"])
        with JOURNAL.step("Apache Kafka pod"):
            install_kafka(made)
        made.ensure_namespace("data")
        with JOURNAL.step("helm install (charts/ordo/README.md's command, 2 replicas)"):
            install_chart(
                made, images.operator,
                "--set", "replicaCount=2", "--set", "podDisruptionBudget.enabled=true",
                "--set", "memberRbac.create=true", "--set", "memberRbac.namespaces={data}",
            )  # fmt: skip
        yield made
    finally:
        if KEEP:
            JOURNAL.say(f"[e2e] ORDO_E2E_KEEP: the cluster runs on; KUBECONFIG={node.kubeconfig}")
        else:
            with JOURNAL.step("cluster stopped"):
                node.stop()


def _node_built() -> bool:
    try:
        node_binaries(build=False)
    except Exception:
        return False
    return True
