"""``ordo testbed up``: both stand-ins in the foreground, usable through the lines it prints."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from ordo_testbed.bed import parse_shell_lines
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed


def _port_open(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, int(port))) == 0


@pytest.mark.timeout(600)  # the start (unbounded here: a loaded machine decides it) and the waits below
def test_testbed_up_prints_sourceable_lines_serves_and_stops(tmp_path: Path) -> None:
    """The whole testbed (Kafka's JVM, etcd, kube-apiserver, ordo's CRDs) from the command line.
    Its start time is printed, not asserted: a loaded machine decides it (the READMEs give it)."""
    started = time.monotonic()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ordo.cli",
            "testbed",
            "up",
            "--kafka-port",
            "0",
            "--kube-port",
            "0",
            "--state-dir",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        printed = [process.stdout.readline() for _ in range(4)]
        assert all(line.startswith("export ") for line in printed), printed
        lines = parse_shell_lines(printed)
        print(f"\ntestbed up and serving in {time.monotonic() - started:.2f}s")
        bootstrap, kubeconfig = lines["ORDO_KAFKA_BOOTSTRAP"], lines["KUBECONFIG"]
        assert lines["ORDO_KAFKA_FAULTS_URL"].startswith("http://127.0.0.1:")
        direct = AdminClient({"bootstrap.servers": lines["KAFKA_DIRECT_BOOTSTRAP"]})
        assert lines["KAFKA_DIRECT_BOOTSTRAP"] != bootstrap and direct.list_topics(timeout=10).brokers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("up-check", 3)])["up-check"].result(10)

        # CreateTopics answers once the controller has the topic; the broker's metadata may lag it
        def partitions() -> int:
            topic = admin.list_topics(timeout=10).topics.get("up-check")
            return 0 if topic is None else len(topic.partitions)

        assert wait_for(partitions, 30, "up-check in the metadata") == 3
        api = kubernetes.config.new_client_from_config(kubeconfig)  # type: ignore[no-untyped-call]
        custom = kubernetes.client.CustomObjectsApi(api)
        listed: Any = custom.list_namespaced_custom_object(
            "ordo.dev", "v1alpha1", "default", "producergroups"
        )
        assert listed["items"] == []
        api.close()
        version = subprocess.run(
            ["kubectl", "version", "-o", "json"], env={**os.environ, "KUBECONFIG": kubeconfig},
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert version.returncode == 0, version.stderr  # the real kubectl, over HTTPS with a client cert
        assert json.loads(version.stdout)["serverVersion"]["gitVersion"].startswith("v1.")
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=90) == 0  # Kafka's JVM and the API server stop in turn
    assert not _port_open(bootstrap), "the proxy stopped with the command"
    assert (tmp_path / "kubeconfig").exists()


@pytest.mark.timeout(600)
def test_testbed_up_in_the_background_is_evaluated_by_a_shell_and_stopped_by_down(tmp_path: Path) -> None:
    """What the README shows: ``eval "$(ordo testbed up --background ...)"`` sets the variables in
    the shell that ran it, which reaches Kafka through them; ``ordo testbed down`` stops it."""
    state = tmp_path / "bed"
    script = (
        f'eval "$({sys.executable} -m ordo.cli testbed up --background --kafka-port 0 --kube-port 0 '
        f'--state-dir {state})" && echo "$ORDO_KAFKA_BOOTSTRAP $KUBECONFIG"'
    )
    shown = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=400, check=True)
    bootstrap, kubeconfig = shown.stdout.split()
    try:
        assert Path(kubeconfig).exists()
        assert AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers
        again = subprocess.run(
            [sys.executable, "-m", "ordo.cli", "testbed", "up", "--background", "--state-dir", str(state)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert again.returncode != 0 and "already runs" in again.stderr
    finally:
        subprocess.run(
            [sys.executable, "-m", "ordo.cli", "testbed", "down", "--state-dir", str(state)],
            timeout=120,
            check=True,
        )
    assert not _port_open(bootstrap), "down stopped Kafka"
    assert not (state / "testbed.pid").exists()


@pytest.mark.timeout(600)
def test_the_benchmarks_find_the_broker_and_the_api_server_in_the_lines_it_prints(tmp_path: Path) -> None:
    """``make bench``'s group and expansion benchmarks start ``ordo testbed up`` and read its lines
    (they read four ``NAME=value`` lines once, and died when the lines became ``export`` lines)."""
    from benchmarks._testbed import full_testbed

    with full_testbed(tmp_path / "bed") as (bootstrap, kubeconfig):
        assert _port_open(bootstrap)
        assert "clusters" in kubeconfig.read_text()
