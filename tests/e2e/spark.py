"""The Spark apps on the e2e cluster, submitted with Spark's own Kubernetes scheduler as the Spark
Operator would submit their SparkApplications (the operator itself cannot be had here: its Go
module and its image are out of reach; docs/reliability.md, "Spark on the real kubelet").

- ``readme_setup``: spark_apps/README.md's ``kubectl`` lines, as typed (the Secret's bootstrap
  is the Kafka Service's ClusterIP: the cluster has no DNS);
- ``SparkApp``: a shipped SparkApplication, with ``E2E_SIZE`` merged in (the image built here and a
  machine-sized driver and executors), through ``ordo_spark.submission`` (the one translation of
  a manifest) into the host's ``spark-submit --master k8s://... --deploy-mode cluster`` (pyspark's
  wheel); ``restart`` is what the operator's ``restartPolicy`` does when the driver is gone;
- the verdicts: the pipeline's own per-key check from its committed Parquet files (Spark's file
  sink log, ``_spark_metadata``), and the sink's output against its input read from Kafka by the
  SDK's independent reader (``ordo.verify.topic``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import yaml

from ordo_spark.submission import APP_NAME_LABEL, Submission, submission
from ordo_testbed.waiting import wait_for

from .cluster import ROOT, Cluster
from .node import SERVICE_IP

README = ROOT / "spark_apps" / "README.md"
MANIFESTS = ROOT / "spark_apps" / "manifests"
DOCUMENTED_BOOTSTRAP = "kafka.kafka:9092"  # the README's Secret: Kafka's Service by its DNS name

# What the run changes in the shipped manifests (a JSON merge patch, RFC 7386): the image built here,
# never pulled, and a driver and executors this 2-core machine holds next to the rest of the suite.
# Python workers live in the pods' memory beside the JVM, hence the overhead.
# The cluster has no DNS: the driver reaches the API server by the kubernetes Service's address,
# not by Spark's default name for it (kubernetes.default.svc).
_POD = {"cores": 1, "coreRequest": "100m", "memory": "512m", "memoryOverhead": "512m"}
_NO_DNS = {"spark.kubernetes.driver.master": f"https://{SERVICE_IP}:443"}
E2E_SIZE: dict[str, dict[str, Any]] = {
    "ordo-ordered-pipeline": {
        "spec": {
            "imagePullPolicy": "Never",
            "sparkConf": {**_NO_DNS, "spark.sql.shuffle.partitions": "4"},
            "driver": _POD,
            "executor": {**_POD, "instances": 2},
        }
    },
    "ordo-exactly-once-sink": {
        "spec": {
            "imagePullPolicy": "Never",
            "sparkConf": _NO_DNS,
            "driver": _POD,
            "executor": {**_POD, "instances": 1},
        }
    },
}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null removes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return patch
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def readme_setup_commands() -> list[list[str]]:
    """The shell block under spark_apps/README.md's "Running the manifests", as a shell splits it."""
    section = README.read_text().split("### Running the manifests", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "spark_apps/README.md: no shell block under Running the manifests"
    return [shlex.split(line.split("  #")[0]) for line in block.group(1).splitlines() if line.strip()]


def readme_setup(cluster: Cluster, namespace: str) -> list[str]:
    """Runs the README's lines but those applying SparkApplications (no operator takes them
    here: ``SparkApp`` submits them); returns what was run. ``create namespace`` of a namespace
    the suite made already is skipped."""
    ran = []
    for argv in readme_setup_commands():
        assert argv[0] == "kubectl", argv
        words = argv[1:]
        if words[:2] == ["create", "namespace"] and _exists(cluster, words[2]):
            continue
        assert namespace in words, f"{shlex.join(argv)}: not in the namespace {namespace}"
        if "apply" in words and any(_is_spark_application(w) for w in words):
            continue
        words = [w.replace(DOCUMENTED_BOOTSTRAP, cluster.bootstrap) for w in words]
        words = [str(ROOT / w) if w.startswith("spark_apps/") else w for w in words]
        cluster.kubectl(*words)
        ran.append(shlex.join(argv))
    return ran


def _exists(cluster: Cluster, namespace: str) -> bool:
    try:
        cluster.core.read_namespace(namespace)
    except kubernetes.client.ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def _is_spark_application(word: str) -> bool:
    path = ROOT / word
    return path.suffix == ".yaml" and path.is_file() and "kind: SparkApplication" in path.read_text()


def host_volumes(cluster: Cluster, folder: Path) -> dict[str, Path]:
    """A PersistentVolume for each claim setup.yaml makes (the e2e cluster has no provisioner):
    a hostPath folder on this host, the node, bound to its claim; returns claim → folder."""
    folders = {}
    for claim in yaml.safe_load_all((MANIFESTS / "setup.yaml").read_text()):
        if claim["kind"] != "PersistentVolumeClaim":
            continue
        name = claim["metadata"]["name"]
        path = folder / name
        path.mkdir(mode=0o777)
        path.chmod(0o777)  # fsGroup does not apply to hostPath: the image's uid 185 writes here
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{name}-{uuid.uuid4().hex[:8]}"},  # a folder's name may hold "_"
            "spec": {
                "capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
                "accessModes": claim["spec"]["accessModes"],
                "persistentVolumeReclaimPolicy": "Delete",
                "hostPath": {"path": str(path), "type": "Directory"},
                "claimRef": {"namespace": "data", "name": name},
            },
        }
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(volume))
        folders[name] = path
    return folders


SUBMITTER = "spark-submitter"


# What submitting does, found by submitting (Spark 4.3): the driver pod, and by server-side apply
# (patch) its Service, its ConfigMaps and a NetworkPolicy letting only the application's pods in.
SUBMITTER_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["services", "configmaps"],
     "verbs": ["create", "get", "list", "watch", "patch", "delete"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
     "verbs": ["create", "get", "list", "watch", "patch", "delete"]},
]  # fmt: skip


def submitter_kubeconfig(cluster: Cluster, namespace: str, folder: Path) -> Path:
    """Who submits, as the Spark Operator submits with its own ServiceAccount's token: a
    ServiceAccount with ``SUBMITTER_RULES`` in ``namespace``. A token, too, because Spark's
    Kubernetes client (fabric8) cannot read the testbed's EC client keys ("Invalid DER: object
    is not integer")."""
    from ordo_testbed.kube.identity import token_kubeconfig, wait_rbac_effective

    meta = {"name": SUBMITTER, "namespace": namespace}
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": SUBMITTER_RULES,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SUBMITTER},
            "subjects": [{"kind": "ServiceAccount", "name": SUBMITTER, "namespace": namespace}],
        },
    ]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))
    wait_rbac_effective(cluster.api, objects)
    path = folder / "submitter.kubeconfig"
    return token_kubeconfig(cluster.node.control, cluster.api, namespace, SUBMITTER, path)


def manifest(name: str) -> dict[str, Any]:
    """The shipped SparkApplication ``name`` with ``E2E_SIZE`` merged in."""
    for path in MANIFESTS.glob("*.yaml"):
        for document in yaml.safe_load_all(path.read_text()):
            if document.get("kind") == "SparkApplication" and document["metadata"]["name"] == name:
                merged: dict[str, Any] = merge_patch(document, E2E_SIZE[name])
                return merged
    raise AssertionError(f"no SparkApplication {name} in spark_apps/manifests")


@dataclass
class SparkApp:
    """One SparkApplication run by spark-submit on the cluster; ``started`` holds each submission's
    seconds from spark-submit to every executor Running."""

    cluster: Cluster
    app: dict[str, Any]
    namespace: str
    folder: Path
    image: str
    kubeconfig: Path
    """The submitter's (``submitter_kubeconfig``)."""
    started: list[float] = field(default_factory=list)
    submissions: int = 0

    @property
    def name(self) -> str:
        return str(self.app["metadata"]["name"])

    def plan(self) -> Submission:
        app = merge_patch(self.app, {"spec": {"image": self.image}})
        return submission(app, self.namespace, submission_id=uuid.uuid4().hex)

    def submit(self) -> Submission:
        """spark-submit (cluster mode) as the operator runs it; returns once the driver pod exists."""
        plan = self.plan()
        self.submissions += 1
        templates = self.folder / f"{self.name}-{self.submissions}"
        templates.mkdir()
        driver, executor = templates / "driver.yaml", templates / "executor.yaml"
        driver.write_text(yaml.safe_dump(plan.driver_template))
        executor.write_text(yaml.safe_dump(plan.executor_template))
        argv = [spark_submit(), *plan.argv(master(self.kubeconfig), str(driver), str(executor))]
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "SPARK_HOME": str(spark_home())}
        log = templates / "spark-submit.log"
        with log.open("wb") as out:
            done = subprocess.run(
                argv, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=300, check=False
            )
        assert done.returncode == 0, f"spark-submit of {self.name} failed:\n{log.read_text()[-4000:]}"
        wait_for(lambda: self.driver() is not None, 60, f"{plan.driver_pod} created", step=0.5)
        return plan

    def start(self, executors: int) -> float:
        """Submit, then wait for the driver and ``executors`` executor pods Running; the seconds."""
        began = time.monotonic()
        self.submit()
        wait_for(lambda: self._running(executors), 600, f"{self.name}: driver and {executors} executors")
        took = time.monotonic() - began
        self.started.append(took)
        return took

    def _running(self, executors: int) -> bool:
        driver = self.driver()
        if driver is None or driver.status.phase in ("Failed", "Succeeded"):
            raise AssertionError(f"{self.name}'s driver ended: {self.driver_log()[-3000:]}")
        running = [p for p in self.executors() if p.status.phase == "Running"]
        return driver.status.phase == "Running" and len(running) >= executors

    def driver(self) -> Any:
        try:
            return self.cluster.core.read_namespaced_pod(f"{self.name}-driver", self.namespace)
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def executors(self) -> list[Any]:
        selector = f"spark-role=executor,{APP_NAME_LABEL}={self.name}"
        return [
            p for p in self.cluster.pods(self.namespace, selector) if p.metadata.deletion_timestamp is None
        ]

    def driver_log(self) -> str:
        try:
            text: str = self.cluster.core.read_namespaced_pod_log(f"{self.name}-driver", self.namespace)
        except kubernetes.client.ApiException as error:
            return f"(no driver log: {error.reason})"
        return text

    def delete_driver(self) -> None:
        """The driver pod deleted (its executors go with it: they are its dependents)."""
        self.cluster.core.delete_namespaced_pod(f"{self.name}-driver", self.namespace)
        wait_for(lambda: self.driver() is None, 180, f"{self.name}'s driver gone", step=0.5)
        wait_for(lambda: not self.executors(), 180, f"{self.name}'s executors gone", step=0.5)

    def restart(self, executors: int) -> float:
        """What the operator does for ``restartPolicy: Always`` once the driver is gone: submit again."""
        assert self.app["spec"]["restartPolicy"]["type"] == "Always"
        return self.start(executors)

    def stop(self) -> None:
        if self.driver() is not None:
            self.delete_driver()


def spark_home() -> Path:
    """pyspark's wheel: Spark's jars (spark-kubernetes among them) and ``bin/spark-submit``."""
    import pyspark

    return Path(pyspark.__file__).parent


def spark_submit() -> str:
    return str(spark_home() / "bin" / "spark-submit")


def master(kubeconfig: Path) -> str:
    config = yaml.safe_load(kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]["server"]
    return f"k8s://{server}"


# --- the verdicts ------------------------------------------------------------------------------------


def committed_files(output: Path) -> list[Path]:
    """The Parquet files Spark's file sink committed under ``output`` (its ``_spark_metadata``
    log: a file written by a task of a batch that never committed is not in it)."""
    added: dict[str, bool] = {}
    log = output / "_spark_metadata"
    if not log.is_dir():
        return []
    batches = sorted(log.iterdir(), key=lambda p: int(p.name.split(".")[0]) if p.name[0].isdigit() else -1)
    for entry in batches:
        if not entry.name[0].isdigit():
            continue
        for line in entry.read_text().splitlines()[1:]:  # the first line is the version ("v1")
            record = json.loads(line)
            added[record["path"]] = record.get("action", "add") == "add"
    return [output / Path(path.removeprefix("file://")).name for path, kept in added.items() if kept]


@dataclass(frozen=True)
class PipelineVerdict:
    rows: int
    distinct: int
    gaps: int
    inversions: int

    def summary(self) -> str:
        return (
            f"{self.rows} rows, {self.distinct} distinct records: gaps {self.gaps}, "
            f"inversions {self.inversions}"
        )


def pipeline_verdict(output: Path) -> PipelineVerdict:
    import pyarrow.parquet as pq

    statuses: Counter[str] = Counter()
    records: set[tuple[str, int]] = set()
    for path in committed_files(output):
        table = pq.read_table(path, columns=["key", "seq", "status"])
        keys, seqs, status = (table.column(c).to_pylist() for c in ("key", "seq", "status"))
        statuses.update(status)
        records.update(zip(keys, seqs, strict=True))
    return PipelineVerdict(
        sum(statuses.values()), len(records), statuses.get("gap", 0), statuses.get("inversion", 0)
    )


@dataclass(frozen=True)
class SinkVerdict:
    inputs: int
    outputs: int
    missing: int
    duplicates: int
    foreign: int

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicates or self.foreign)

    def summary(self) -> str:
        return (
            f"{self.inputs} input records, {self.outputs} output records (read committed): missing "
            f"{self.missing}, written twice {self.duplicates}, not from the input {self.foreign}"
        )


def sink_verdict(bootstrap: str, source: str, output: str) -> SinkVerdict:
    """Each record of ``source`` once in ``output``, by (key, number), both read to their end
    with a plain read_committed consumer (nothing of the sink's)."""
    inputs, outputs = committed_records(bootstrap, source), committed_records(bootstrap, output)
    return SinkVerdict(
        inputs=sum(inputs.values()),
        outputs=sum(outputs.values()),
        missing=len(set(inputs) - set(outputs)),
        duplicates=sum(n - 1 for n in outputs.values() if n > 1),
        foreign=len(set(outputs) - set(inputs)),
    )


def committed_records(bootstrap: str, topic: str, timeout: float = 120) -> Counter[tuple[str, int]]:
    """How often each numbered record (``{"k": key, "s": n}``) is in ``topic``, read committed."""
    from confluent_kafka import Consumer, TopicPartition

    from ordo_testbed.kafka.testing import consume

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"e2e-verify-{uuid.uuid4().hex[:8]}",
        "isolation.level": "read_committed", "enable.partition.eof": True, "enable.auto.commit": False,
    })  # fmt: skip
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        messages = consume(consumer, until_eof=len(partitions), timeout=timeout)
    finally:
        consumer.close()
    records = (json.loads(m.value() or b"{}") for m in messages)
    return Counter((str(r["k"]), int(r["s"])) for r in records)


def work_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="ordo-e2e-spark-", dir="/tmp"))
    folder.chmod(0o755)
    return folder
