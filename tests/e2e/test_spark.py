"""The Spark apps as driver and executor pods on the real kubelet (issue 39): spark_apps/README.md's
``kubectl`` set-up as typed, both shipped SparkApplications submitted with Spark's own Kubernetes
scheduler (``tests/e2e/spark.py``: the Spark Operator is not run here), reading ``orders`` through
the gate while an OrderedTopicExpansion grows it and producer pods write; an executor pod deleted
mid-batch, both drivers deleted and submitted again; the outputs judged at the end. Then a
SparkApplication with a wrong option fails with the source's own message in its driver's log.

Runs before the uninstall (``conftest``: the uninstall is the suite's last test).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient, NewTopic

from ordo_testbed.kafka.testing import await_records
from ordo_testbed.resources import Expansions
from ordo_testbed.waiting import wait_for

from .cluster import APP_NAMESPACE, Cluster
from .spark import (
    SparkApp,
    committed_files,
    host_volumes,
    manifest,
    pipeline_verdict,
    readme_setup,
    sink_verdict,
    submitter_kubeconfig,
    work_folder,
)
from .steps import JOURNAL
from .workloads import PodWorkload

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2700)]
PIPELINE, SINK = "ordo-ordered-pipeline", "ordo-exactly-once-sink"
SOURCE, OUTPUT = "orders", "orders-enriched"  # the shipped manifests' topics


@dataclass
class SparkRun:
    cluster: Cluster
    folder: Path
    volumes: dict[str, Path]
    submitter: Path
    pipeline: SparkApp
    sink: SparkApp


@pytest.fixture(scope="module")
def spark_run(cluster: Cluster) -> Iterator[SparkRun]:
    folder = work_folder()
    apps: list[SparkApp] = []
    try:
        with JOURNAL.step(
            "Spark: spark_apps/README.md's kubectl set-up, a hostPath volume per claim"
        ) as notes:
            notes += readme_setup(cluster, APP_NAMESPACE)
            volumes = host_volumes(cluster, folder)
            submitter = submitter_kubeconfig(cluster, APP_NAMESPACE, folder)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for topic in (SOURCE, OUTPUT):
            admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(60)
        apps = [
            SparkApp(cluster, manifest(name), APP_NAMESPACE, folder, cluster.images.spark, submitter)
            for name in (PIPELINE, SINK)
        ]
        yield SparkRun(cluster, folder, volumes, submitter, *apps)
    finally:
        for app in apps:
            app.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_the_spark_image_adds_a_passwd_entry_for_an_unknown_uid(cluster: Cluster) -> None:
    """What Spark's own entrypoint does for a pod's runAsUser the image does not know."""
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--user", "4242:0", cluster.images.spark,
         "sh", "-c", "getent passwd 4242 && whoami"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("4242:x:4242:0:anonymous uid:"), done.stdout


def test_the_readme_setup_lets_the_driver_account_run_executors(spark_run: SparkRun) -> None:
    cluster = spark_run.cluster
    account = f"system:serviceaccount:{APP_NAMESPACE}:ordo-spark"
    for verb, resource in [("create", "pods"), ("delete", "pods"), ("create", "services"),
                           ("create", "configmaps")]:  # fmt: skip
        said = cluster.kubectl("auth", "can-i", verb, resource, "-n", APP_NAMESPACE, f"--as={account}")
        assert said.strip() == "yes", f"{account} may not {verb} {resource}"
    secret = cluster.core.read_namespaced_secret("ordo-spark-kafka", APP_NAMESPACE)
    assert set(secret.data or {}) == {"ORDO_KAFKA_BOOTSTRAP"}

    def bound() -> bool:
        claims: list[Any] = cluster.core.list_namespaced_persistent_volume_claim(APP_NAMESPACE).items
        return {c.metadata.name for c in claims if c.status.phase == "Bound"} >= set(spark_run.volumes)

    wait_for(bound, 120, "setup.yaml's claims bound", step=1)


def test_both_apps_run_as_pods_through_an_expansion_an_executor_lost_and_drivers_resubmitted(
    spark_run: SparkRun,
) -> None:
    cluster, pipeline, sink = spark_run.cluster, spark_run.pipeline, spark_run.sink
    workload = PodWorkload(
        cluster, APP_NAMESPACE, SOURCE, spark_run.folder / "workload", producers=2, consumers=0, keys=200,
        rate=40,
    )  # fmt: skip
    expansions = Expansions(cluster.custom, APP_NAMESPACE)
    output = spark_run.volumes["ordo-ordered-pipeline-data"] / "ordered-checks"
    try:
        for app, executors in ((pipeline, 2), (sink, 1)):
            with JOURNAL.step(f"Spark: {app.name} submitted, driver and {executors} executor pod(s) Running"):
                app.start(executors)
        # the driver created its executors under its ServiceAccount: they are its dependents
        for app in (pipeline, sink):
            owners = {ref.name for p in app.executors() for ref in p.metadata.owner_references or []}
            assert owners == {f"{app.name}-driver"}, owners
        workload.start_producers()
        await_records(cluster.bootstrap, SOURCE, 3, 600, timeout=300)
        wait_for(lambda: committed_files(output), 300, "the pipeline's first committed Parquet files", step=1)

        # an executor pod deleted while batches run: the driver asks for another, tasks run again
        wait_for(lambda: pipeline._running(2), 300, f"{PIPELINE}'s 2 executors", step=1)
        victim = pipeline.executors()[0].metadata.name
        cluster.core.delete_namespaced_pod(victim, APP_NAMESPACE)
        wait_for(
            lambda: victim not in {p.metadata.name for p in pipeline.executors()} and pipeline._running(2),
            300, f"a new executor in place of {victim}", step=1,
        )  # fmt: skip

        name = f"{SOURCE}-to-4"
        manifest = {
            "apiVersion": "ordo.dev/v1alpha1",
            "kind": "OrderedTopicExpansion",
            "metadata": {"name": name, "namespace": APP_NAMESPACE},
            "spec": {"topic": SOURCE, "partitions": 4, "fenceTimeoutSeconds": 60},
        }
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
        expansions.wait_phase(name, "Completed", 300)
        await_records(cluster.bootstrap, SOURCE, 4, 600, timeout=300)

        # both drivers deleted mid-stream, submitted again as restartPolicy Always does: each
        # resumes from its checkpoint
        with JOURNAL.step("Spark: both drivers deleted, submitted again, Running"):
            for app in (pipeline, sink):
                app.delete_driver()
            pipeline.restart(2)
            sink.restart(1)
        await_records(cluster.bootstrap, SOURCE, 4, 900, timeout=300)
        delivered = workload.stop_producers()

        def caught_up() -> bool:
            copied = sink_verdict(cluster.bootstrap, SOURCE, OUTPUT)
            return copied.missing == 0 and pipeline_verdict(output).distinct >= copied.inputs

        wait_for(caught_up, 600, f"both apps through every record of {SOURCE}", step=5)
    finally:
        workload.stop_producers()
    checks, copied = pipeline_verdict(output), sink_verdict(cluster.bootstrap, SOURCE, OUTPUT)
    JOURNAL.verdict(f"Spark {PIPELINE} (its per-key check, committed Parquet)", checks.summary())
    JOURNAL.verdict(f"Spark {SINK} ({SOURCE} -> {OUTPUT}, read from Kafka)", copied.summary())
    times = "; ".join(
        f"{app.name}: " + ", ".join(f"{t:.1f} s" for t in app.started) for app in (pipeline, sink)
    )
    JOURNAL.verdict("Spark applications' start (spark-submit to executors Running)", times)
    assert checks.gaps == 0 and checks.inversions == 0, checks.summary()
    assert copied.ok and copied.inputs >= delivered > 0, (copied.summary(), delivered)
    assert checks.distinct == copied.inputs, (checks.summary(), copied.summary())


def test_a_wrong_source_option_fails_with_the_sources_message_in_the_driver_log(spark_run: SparkRun) -> None:
    """The pipeline's manifest with a misspelt source option: its driver fails, and its log says
    what the source says (Spark's own error wrapping would not name the option)."""
    for app in (spark_run.pipeline, spark_run.sink):
        app.stop()  # the machine holds one more driver, not three
    wrong = manifest(PIPELINE)
    wrong["metadata"]["name"] = "ordo-wrong-option"
    wrong["spec"]["arguments"] = [  # its own output and checkpoint, and one option misspelt
        f"--topic={SOURCE}", "--output=/data/wrong-option", "--checkpoint=/data/checkpoints/wrong-option",
        "--option=maxOffsetPerTrigger=10",
    ]  # fmt: skip
    images = spark_run.cluster.images
    app = SparkApp(
        spark_run.cluster, wrong, APP_NAMESPACE, spark_run.folder, images.spark, spark_run.submitter
    )
    try:
        app.submit()
        wait_for(lambda: app.driver().status.phase == "Failed", 300, "the driver to fail", step=1)
        log = app.driver_log()
        # Spark hands a data source its options lower-cased: the source names the option so
        assert "unknown option 'maxoffsetpertrigger': did you mean maxOffsetsPerTrigger?" in log, log[-3000:]
    finally:
        app.stop()
