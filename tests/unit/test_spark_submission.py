"""The SparkApplication → spark-submit translation (``ordo_spark.submission``) on the shipped
manifests and on the fields it must refuse rather than drop."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from ordo_spark.submission import APP_NAME_LABEL, Submission, UnsupportedField, submission

MANIFESTS = Path(__file__).parents[2] / "spark_apps" / "manifests"


def _app(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((MANIFESTS / name).read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture
def pipeline() -> dict[str, Any]:
    return _app("ordered-pipeline.yaml")


def test_the_pipeline_is_submitted_with_everything_its_manifest_declares(pipeline: dict[str, Any]) -> None:
    sub = submission(pipeline, "data", submission_id="s-1")
    spec = pipeline["spec"]
    assert sub.name == "ordo-ordered-pipeline" and sub.namespace == "data"
    assert sub.main == spec["mainApplicationFile"] and sub.arguments == spec["arguments"]
    conf = sub.conf
    assert conf["spark.kubernetes.namespace"] == "data"
    assert conf["spark.kubernetes.container.image"] == spec["image"]
    assert conf["spark.kubernetes.container.image.pullPolicy"] == spec["imagePullPolicy"]
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == "ordo-spark"
    assert conf["spark.driver.memory"] == spec["driver"]["memory"]
    assert conf["spark.driver.cores"] == "1" and conf["spark.kubernetes.driver.limit.cores"] == "1200m"
    assert (
        conf["spark.executor.instances"] == "2"
        and conf["spark.executor.memory"] == spec["executor"]["memory"]
    )
    assert conf["spark.executor.cores"] == "2"
    for key, value in spec["sparkConf"].items():
        assert conf[key] == value
    # the operator's labels: the executors' pod affinity finds the driver by the app-name label
    assert conf[f"spark.kubernetes.driver.label.{APP_NAME_LABEL}"] == "ordo-ordered-pipeline"
    assert conf["spark.kubernetes.driver.label.sparkoperator.k8s.io/submission-id"] == "s-1"
    assert sub.driver_pod == "ordo-ordered-pipeline-driver"
    assert conf["spark.kubernetes.submission.waitAppCompletion"] == "false"
    assert sub.restart_policy["type"] == "Always"


def test_pod_fields_go_into_the_templates(pipeline: dict[str, Any]) -> None:
    sub = submission(pipeline, "data")
    spec = pipeline["spec"]
    for role, template in (("driver", sub.driver_template), ("executor", sub.executor_template)):
        pod = template["spec"]
        (container,) = pod["containers"]
        assert container["name"] == sub.conf[f"spark.kubernetes.{role}.podTemplateContainerName"]
        assert container["envFrom"] == [{"secretRef": {"name": "ordo-spark-kafka"}}]
        assert container["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]
        assert pod["securityContext"] == {"fsGroup": 185}
        assert pod["volumes"] == spec["volumes"]
    assert sub.executor_template["spec"]["affinity"] == spec["executor"]["affinity"]
    assert "affinity" not in sub.driver_template["spec"]


def test_a_volume_goes_only_to_the_pods_that_mount_it() -> None:
    sink = submission(_app("exactly-once-sink.yaml"), "data")
    assert sink.driver_template["spec"]["volumes"][0]["persistentVolumeClaim"] == {
        "claimName": "ordo-exactly-once-sink-data"
    }
    assert "volumes" not in sink.executor_template["spec"]


def test_secrets_are_mounted_where_the_manifest_says(pipeline: dict[str, Any]) -> None:
    """The operator's ``secrets``: e.g. Strimzi's KafkaUser and CA Secrets where the jobs read
    them (ORDO_KAFKA_SECRETS_DIR)."""
    pipeline["spec"]["executor"]["secrets"] = [{"name": "spark", "path": "/etc/ordo/kafka-secrets/spark"}]
    template = submission(pipeline, "data").executor_template["spec"]
    assert {"name": "spark-volume", "secret": {"secretName": "spark"}} in template["volumes"]
    assert {"name": "spark-volume", "mountPath": "/etc/ordo/kafka-secrets/spark"} in (
        template["containers"][0]["volumeMounts"]
    )


def test_argv_is_spark_submits_with_the_templates_and_ends_with_the_job(pipeline: dict[str, Any]) -> None:
    sub = submission(pipeline, "jobs")
    argv = sub.argv("k8s://https://10.0.0.1:443", "/t/driver.yaml", "/t/executor.yaml")
    assert argv[:6] == [
        "--master",
        "k8s://https://10.0.0.1:443",
        "--deploy-mode",
        "cluster",
        "--name",
        sub.name,
    ]
    confs = dict(argv[i + 1].split("=", 1) for i, word in enumerate(argv) if word == "--conf")
    assert confs["spark.kubernetes.driver.podTemplateFile"] == "/t/driver.yaml"
    assert confs["spark.kubernetes.executor.podTemplateFile"] == "/t/executor.yaml"
    assert confs["spark.kubernetes.namespace"] == "jobs"
    assert argv[-len(sub.arguments) - 1 :] == [sub.main, *sub.arguments]


def test_every_shipped_manifest_translates() -> None:
    for path in MANIFESTS.glob("*.yaml"):
        for document in yaml.safe_load_all(path.read_text()):
            if document.get("kind") == "SparkApplication":
                assert isinstance(submission(document, "data"), Submission)


def test_the_manifests_own_sparkconf_wins(pipeline: dict[str, Any]) -> None:
    pipeline["spec"]["sparkConf"]["spark.executor.memory"] = "3g"
    assert submission(pipeline, "data").conf["spark.executor.memory"] == "3g"


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        (lambda s: s.update(deps={"packages": ["x:y:1"]}), "spec: deps"),
        (
            lambda s: s["driver"].update(
                secrets=[{"name": "s", "path": "/s", "secretType": "GCPServiceAccount"}]
            ),
            "only Generic",
        ),
        (lambda s: s["executor"].update(gpu={"name": "nvidia.com/gpu"}), "spec.executor: gpu"),
        (lambda s: s.update(mode="client"), "only cluster mode"),
        (lambda s: s.update(volumes=[]), "volumes spec.volumes lacks"),
        (lambda s: s.update(type="Scala"), "needs spec.mainClass"),
    ],
)
def test_what_it_would_drop_is_refused(pipeline: dict[str, Any], change: Any, complaint: str) -> None:
    changed = copy.deepcopy(pipeline)
    change(changed["spec"])
    with pytest.raises(UnsupportedField, match=complaint):
        submission(changed, "data")


def test_a_namespace_is_needed(pipeline: dict[str, Any]) -> None:
    assert "namespace" not in pipeline["metadata"]  # the shipped manifests take -n
    with pytest.raises(UnsupportedField, match="no namespace"):
        submission(pipeline)
    pipeline["metadata"]["namespace"] = "own"
    assert submission(pipeline).namespace == "own"
