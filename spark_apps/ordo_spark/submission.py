"""A SparkApplication (the Kubeflow Spark Operator's ``sparkoperator.k8s.io/v1beta2``) as the
``spark-submit`` that runs it with Spark's own Kubernetes scheduler, as the operator submits it:
``--master k8s://... --deploy-mode cluster``, every setting as ``--conf``, and the pod-level
fields Spark has no setting for (volumes and their mounts, ``envFrom``, security contexts,
affinity, ...) in a driver and an executor pod template.

This is the one place the project turns its manifests into what runs, so the two cannot drift: a
field it does not know is refused (``UnsupportedField``) rather than dropped. Pure: the caller
writes the templates where ``Submission.argv`` says and runs ``spark-submit``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["APP_NAME_LABEL", "SUBMISSION_ID_LABEL", "Submission", "UnsupportedField", "submission"]

APP_NAME_LABEL = "sparkoperator.k8s.io/app-name"
"""The label the Spark Operator puts on an application's pods (and what the manifests' pod
affinity selects the driver by)."""
SUBMISSION_ID_LABEL = "sparkoperator.k8s.io/submission-id"
CONTAINERS = {"driver": "spark-kubernetes-driver", "executor": "spark-kubernetes-executor"}

# spec fields: those read here, and those that only the operator acts on (after submission)
_SPEC = {
    "type", "pythonVersion", "mode", "sparkVersion", "image", "imagePullPolicy", "imagePullSecrets",
    "mainApplicationFile", "mainClass", "arguments", "sparkConf", "hadoopConf", "volumes", "driver",
    "executor", "restartPolicy", "timeToLiveSeconds",
}  # fmt: skip
# per role: Spark settings (``spark.<role>.*`` / ``spark.kubernetes.<role>.*``) ...
_CONF = {
    "cores": "spark.{role}.cores",
    "memory": "spark.{role}.memory",
    "memoryOverhead": "spark.{role}.memoryOverhead",
    "javaOptions": "spark.{role}.extraJavaOptions",
    "coreRequest": "spark.kubernetes.{role}.request.cores",
    "coreLimit": "spark.kubernetes.{role}.limit.cores",
    "image": "spark.kubernetes.{role}.container.image",
    "serviceAccount": "spark.kubernetes.authenticate.{role}.serviceAccountName",
}
# ... and pod-template fields: (where in the pod, the name there)
_POD_SPEC = {
    "podSecurityContext": "securityContext",
    "affinity": "affinity",
    "nodeSelector": "nodeSelector",
    "tolerations": "tolerations",
    "terminationGracePeriodSeconds": "terminationGracePeriodSeconds",
}
_CONTAINER = {
    "env": "env",
    "envFrom": "envFrom",
    "volumeMounts": "volumeMounts",
    "securityContext": "securityContext",
}
_ROLE = {*_CONF, *_POD_SPEC, *_CONTAINER, "labels", "annotations", "secrets"}
_EXECUTOR = {
    "instances": "spark.executor.instances",
    "deleteOnTermination": "spark.kubernetes.executor.deleteOnTermination",
}


class UnsupportedField(ValueError):
    """A SparkApplication field this translation does not carry over (it would be dropped)."""


@dataclass(frozen=True)
class Submission:
    """What ``spark-submit`` runs for one SparkApplication."""

    name: str
    namespace: str
    main: str
    arguments: list[str]
    conf: dict[str, str]
    """Every ``--conf`` but the pod templates' files (the caller's paths, see ``argv``)."""
    driver_template: dict[str, Any]
    executor_template: dict[str, Any]
    restart_policy: dict[str, Any] = field(default_factory=dict)
    """The operator's restart policy (``type``: Never, OnFailure, Always; the intervals): for the
    caller, which plays the operator's part when a driver ends."""

    @property
    def driver_pod(self) -> str:
        return self.conf["spark.kubernetes.driver.pod.name"]

    def argv(self, master: str, driver_template: str, executor_template: str) -> list[str]:
        """``spark-submit``'s arguments (without the program), the templates at the given paths."""
        conf = {
            **self.conf,
            "spark.kubernetes.driver.podTemplateFile": driver_template,
            "spark.kubernetes.executor.podTemplateFile": executor_template,
        }
        words = ["--master", master, "--deploy-mode", "cluster", "--name", self.name]
        for key, value in sorted(conf.items()):
            words += ["--conf", f"{key}={value}"]
        return [*words, self.main, *self.arguments]


def submission(app: Mapping[str, Any], namespace: str | None = None, submission_id: str = "") -> Submission:
    """The submission of ``app`` (a SparkApplication as loaded from YAML) into ``namespace`` (the
    one ``kubectl apply -n`` would give it; default: its own ``metadata.namespace``).
    ``submission_id`` labels its pods, as the operator labels each submission's."""
    if app.get("apiVersion") != "sparkoperator.k8s.io/v1beta2" or app.get("kind") != "SparkApplication":
        raise UnsupportedField(f"not a v1beta2 SparkApplication: {app.get('apiVersion')}/{app.get('kind')}")
    metadata, spec = app["metadata"], app["spec"]
    name = str(metadata["name"])
    where = namespace or metadata.get("namespace")
    if not where:
        raise UnsupportedField(f"{name}: no namespace (the manifest names none: give the one to apply it in)")
    _refuse(spec, _SPEC, "spec")
    if spec.get("mode", "cluster") != "cluster":
        raise UnsupportedField(f"spec.mode {spec['mode']}: only cluster mode is submitted")
    main = str(spec["mainApplicationFile"])
    if spec["type"] != "Python" and "mainClass" not in spec:
        raise UnsupportedField(f"spec.type {spec['type']} needs spec.mainClass")
    labels = {APP_NAME_LABEL: name, **({SUBMISSION_ID_LABEL: submission_id} if submission_id else {})}
    conf: dict[str, str] = {
        "spark.kubernetes.namespace": str(where),
        "spark.kubernetes.driver.pod.name": f"{name}-driver",
        "spark.kubernetes.submission.waitAppCompletion": "false",  # the operator's: submit and return
        "spark.kubernetes.driver.podTemplateContainerName": CONTAINERS["driver"],
        "spark.kubernetes.executor.podTemplateContainerName": CONTAINERS["executor"],
    }
    if "image" in spec:
        conf["spark.kubernetes.container.image"] = str(spec["image"])
    if "imagePullPolicy" in spec:
        conf["spark.kubernetes.container.image.pullPolicy"] = str(spec["imagePullPolicy"])
    if spec.get("imagePullSecrets"):
        conf["spark.kubernetes.container.image.pullSecrets"] = ",".join(spec["imagePullSecrets"])
    if "mainClass" in spec:
        conf["spark.submit.mainClass"] = str(spec["mainClass"])  # what --class sets
    for key, value in (spec.get("hadoopConf") or {}).items():
        conf[f"spark.hadoop.{key}"] = str(value)
    volumes = {str(v["name"]): v for v in spec.get("volumes") or []}
    templates = {}
    for role in ("driver", "executor"):
        pod = spec[role]
        known = _ROLE | (set(_EXECUTOR) if role == "executor" else set())
        _refuse(pod, known, f"spec.{role}")
        for key, setting in _CONF.items():
            if key in pod:
                conf[setting.format(role=role)] = _text(pod[key])
        if role == "executor":
            for key, setting in _EXECUTOR.items():
                if key in pod:
                    conf[setting] = _text(pod[key])
        for key, value in {**labels, **(pod.get("labels") or {})}.items():
            conf[f"spark.kubernetes.{role}.label.{key}"] = str(value)
        for key, value in (pod.get("annotations") or {}).items():
            conf[f"spark.kubernetes.{role}.annotation.{key}"] = str(value)
        templates[role] = _template(role, pod, volumes)
    # sparkConf last: what the manifest sets itself wins, as with the operator
    conf.update({str(k): _text(v) for k, v in (spec.get("sparkConf") or {}).items()})
    return Submission(
        name=name,
        namespace=str(where),
        main=main,
        arguments=[str(a) for a in spec.get("arguments") or []],
        conf=conf,
        driver_template=templates["driver"],
        executor_template=templates["executor"],
        restart_policy=dict(spec.get("restartPolicy") or {}),
    )


def _template(role: str, pod: Mapping[str, Any], volumes: Mapping[str, Any]) -> dict[str, Any]:
    """The pod template of ``role``: its container's and its pod's fields, and the volumes its
    mounts name (from ``spec.volumes``)."""
    container: dict[str, Any] = {"name": CONTAINERS[role]}
    spec: dict[str, Any] = {}
    for key, there in _CONTAINER.items():
        if key in pod:
            container[there] = copy.deepcopy(pod[key])
    for key, there in _POD_SPEC.items():
        if key in pod:
            spec[there] = copy.deepcopy(pod[key])
    mounted = [m["name"] for m in pod.get("volumeMounts") or []]
    missing = [name for name in mounted if name not in volumes]
    if missing:
        raise UnsupportedField(f"spec.{role}.volumeMounts name volumes spec.volumes lacks: {missing}")
    pod_volumes = [copy.deepcopy(volumes[name]) for name in dict.fromkeys(mounted)]
    for i, secret in enumerate(pod.get("secrets") or []):  # the operator's: a Secret volume each
        _refuse(secret, {"name", "path", "secretType"}, f"spec.{role}.secrets[{i}]")
        if secret.get("secretType", "Generic") != "Generic":
            raise UnsupportedField(
                f"spec.{role}.secrets[{i}].secretType {secret['secretType']}: only Generic"
            )
        volume = f"{secret['name']}-volume"
        pod_volumes.append({"name": volume, "secret": {"secretName": secret["name"]}})
        container.setdefault("volumeMounts", []).append({"name": volume, "mountPath": secret["path"]})
    if pod_volumes:
        spec["volumes"] = pod_volumes
    spec["containers"] = [container]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": spec}


def _refuse(fields: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(fields) - known)
    if unknown:
        raise UnsupportedField(f"{where}: {', '.join(unknown)} not carried over to spark-submit")


def _text(value: object) -> str:
    """A manifest value as Spark's setting: booleans as ``true``/``false``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
