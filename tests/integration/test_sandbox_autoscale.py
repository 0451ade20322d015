"""``ordo sandbox --autoscale`` end to end, scaled down and without Spark (as test_sandbox.py): the load
ramps, the TopicAutoscaler grows the topic 4 -> 8 -> 16 by itself, the GatedConsumers read each
growth's new partitions within 30 s of its decision, and the independent verifier finds nothing
lost, doubled, misplaced or out of order in Kafka and in what the consumers processed. It runs
against the session's Kafka and API server (``--bootstrap``, ``--kubeconfig``; the operator runs
here), so it starts no testbed of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ordo_testbed.kafka import KafkaTestbed
from ordo_testbed.kube.fixtures import KubeCluster

SANDBOX_SECONDS = 400  # the 45 s of load, however long a loaded machine makes the rest
pytestmark = [pytest.mark.testbed, pytest.mark.slow, pytest.mark.timeout(SANDBOX_SECONDS + 60)]
READ_BOUND = 30.0  # issue 43: from a growth's decision to the consumers reading its partitions


def test_a_ramping_load_grows_the_topic_by_itself_and_the_consumers_follow_in_order(
    tmp_path: Path, kube_cluster: KubeCluster, kafka_testbed: KafkaTestbed | None
) -> None:
    if kube_cluster.server is None or kafka_testbed is None:
        pytest.skip("runs against the testbed's Kafka and API server; make e2e runs the sandbox on a cluster")
    report_path, topic = tmp_path / "report.json", f"autoscale-{time.monotonic_ns()}"
    # 200 -> 1,200 records/s at 100 per partition: 4 partitions are outgrown at 400 (4 s in), 8 at
    # 800 (12 s in); the window and cooldown are short; the hold (25 s at 1,200) leaves a loaded
    # machine's operator time for the second growth and the consumers time to read the 16
    argv = [sys.executable, "-m", "ordo.cli", "sandbox", "--autoscale", "--no-spark", "--live", "--report",
            str(report_path), "--workdir", str(tmp_path / "run"), "--topic", topic,
            "--kubeconfig", str(kube_cluster.kubeconfig_path), "--bootstrap", kafka_testbed.bootstrap,
            "--duration", "20", "--hold", "25", "--rate-from", "200", "--rate-to", "1200", "--keys", "4000",
            "--target", "100", "--window", "3", "--cooldown", "3"]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=SANDBOX_SECONDS, env={**os.environ, "COLUMNS": "200"}
    )  # the live view, unwrapped
    print(f"sandbox took {time.monotonic() - started:.1f}s\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}")
    assert report_path.exists(), done.stderr[-2000:]
    report = json.loads(report_path.read_text())
    failed = [c for c in report["checks"] if not c["ok"]]
    assert done.returncode == 0 and report["ok"], failed

    growths = [(g["from_partitions"], g["to_partitions"]) for g in report["growths"]]
    assert growths == [(4, 8), (8, 16)] and report["partitions"] == [4, 16]
    for growth in report["growths"]:
        assert growth["completed_at"] > growth["decided_at"] > 0
        assert "records/s needs" in growth["reason"], growth
        assert 0 < growth["to_consumers_seconds"] <= READ_BOUND, growth
    kafka, consumers = report["kafka"], report["consumers"]
    assert kafka["records"] == report["produced"] > 10_000 and kafka["epochs"] == 3
    assert kafka["duplicates"] == kafka["missing"] == kafka["order_violations"] == kafka["misplaced"] == 0
    assert consumers["lost"] == 0 and consumers["order_violations"] == 0
    assert consumers["processed"] >= report["produced"]
    # the live view showed the autoscaler deciding (--live: the view goes to the captured output)
    assert "TopicAutoscaler" in done.stdout and "expansion in flight" in done.stdout
    assert "✓ the topic grew by itself" in done.stdout
