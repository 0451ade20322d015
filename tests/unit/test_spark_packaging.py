"""The Spark apps' deployment files, checked by machine: the SparkApplication manifests against the
fields the Kubeflow Spark Operator's v1beta2 API requires (and no unknown ones, which the API server
would silently prune), and the Dockerfile for a pinned slim base, a non-root user and ordo
installed from this repository, consistent with each other and with the jobs' arguments."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).parents[2]
APPS = ROOT / "spark_apps"
SETUP = APPS / "manifests" / "setup.yaml"
KUSTOMIZATION = APPS / "manifests" / "kustomization.yaml"
MANIFESTS = sorted(m for m in (APPS / "manifests").glob("*.yaml") if m not in (SETUP, KUSTOMIZATION))

# The v1beta2 SparkApplication fields (github.com/kubeflow/spark-operator api/v1beta2): spec needs
# type, sparkVersion, mainApplicationFile, driver and executor; enums and minimums as the CRD has them.
_QUANTITY = {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?([kmgtKMGT]i?|[kmgt])?$"}
_ENV_FROM = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "prefix": {"type": "string"},
            "secretRef": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
            "configMapRef": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}},
            },
        },
    },
}
_POD = {
    "cores": {"type": "integer", "minimum": 1},
    "coreLimit": {"type": "string"},
    "coreRequest": {"type": "string"},
    "memory": _QUANTITY,
    "memoryOverhead": _QUANTITY,
    "image": {"type": "string"},
    "env": {"type": "array"},
    "envFrom": _ENV_FROM,
    "labels": {"type": "object"},
    "annotations": {"type": "object"},
    "serviceAccount": {"type": "string"},
    "javaOptions": {"type": "string"},
    "volumeMounts": {"type": "array"},
    "secrets": {"type": "array"},
    "configMaps": {"type": "array"},
    "nodeSelector": {"type": "object"},
    "tolerations": {"type": "array"},
    "affinity": {"type": "object"},
    "podSecurityContext": {"type": "object"},
    "securityContext": {"type": "object"},
    "terminationGracePeriodSeconds": {"type": "integer"},
}
SPARK_APPLICATION = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "sparkoperator.k8s.io/v1beta2"},
        "kind": {"const": "SparkApplication"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}},
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["type", "sparkVersion", "mainApplicationFile", "driver", "executor"],
            "properties": {
                "type": {"enum": ["Java", "Python", "Scala", "R"]},
                "pythonVersion": {"enum": ["2", "3"]},
                "mode": {"enum": ["cluster", "client"]},
                "sparkVersion": {"type": "string"},
                "image": {"type": "string"},
                "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
                "imagePullSecrets": {"type": "array", "items": {"type": "string"}},
                "mainApplicationFile": {"type": "string"},
                "arguments": {"type": "array", "items": {"type": "string"}},
                "sparkConf": {"type": "object", "additionalProperties": {"type": "string"}},
                "hadoopConf": {"type": "object", "additionalProperties": {"type": "string"}},
                "volumes": {"type": "array"},
                "deps": {"type": "object"},
                "timeToLiveSeconds": {"type": "integer"},
                "restartPolicy": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "type": {"enum": ["Never", "Always", "OnFailure"]},
                        "onSubmissionFailureRetries": {"type": "integer", "minimum": 0},
                        "onFailureRetries": {"type": "integer", "minimum": 0},
                        "onSubmissionFailureRetryInterval": {"type": "integer", "minimum": 1},
                        "onFailureRetryInterval": {"type": "integer", "minimum": 1},
                    },
                },
                "driver": {"type": "object", "additionalProperties": False, "properties": _POD},
                "executor": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        **_POD,
                        "instances": {"type": "integer", "minimum": 1},
                        "deleteOnTermination": {"type": "boolean"},
                    },
                },
            },
        },
    },
}


def _load(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text())
    assert isinstance(loaded, dict)
    return loaded


def _job(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"job_{name}", APPS / "jobs" / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _instructions() -> list[tuple[str, str]]:
    """The Dockerfile as (INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (APPS / "Dockerfile").read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


def _final_stage() -> list[tuple[str, str]]:
    steps = _instructions()
    last_from = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[last_from:]


def _setup() -> dict[tuple[str, str], dict[str, Any]]:
    """setup.yaml's objects by (kind, name)."""
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(SETUP.read_text())}


def _image_uid() -> int:
    return int(next(args for word, args in reversed(_final_stage()) if word == "USER").split(":")[0])


# What Spark's Kubernetes backend does as the driver (Spark's running-on-kubernetes RBAC section):
# executor pods, the driver's headless Service, the ConfigMaps of Spark's configuration, and
# PersistentVolumeClaims for on-demand volumes.
DRIVER_NEEDS = {
    "pods": {"create", "get", "list", "watch", "delete"},
    "services": {"create", "get", "patch", "delete"},  # Spark 4: server-side apply (patch)
    "configmaps": {"create", "get", "patch", "delete"},
    "persistentvolumeclaims": {"create", "get", "list", "delete"},
}
# Which pods write each path argument of a job: a checkpoint by the driver, a stateful query's
# state store and file output by executors too.
WRITERS: dict[str, dict[str, tuple[str, ...]]] = {
    "ordered_pipeline.py": {"checkpoint": ("driver", "executor"), "output": ("driver", "executor")},
    "exactly_once_sink.py": {"checkpoint": ("driver",)},
}


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_the_driver_runs_as_an_account_setup_creates_with_what_spark_needs(path: Path) -> None:
    """In the namespace ``kubectl apply -n`` gives them all: no object names one, and the
    RoleBinding's subject is the ServiceAccount of its own namespace (RBAC's default for a
    RoleBinding's ServiceAccount subject without one)."""
    app = _load(path)
    account = app["spec"]["driver"]["serviceAccount"]
    objects = _setup()
    assert "namespace" not in app["metadata"]
    assert all("namespace" not in o["metadata"] for o in objects.values())
    assert ("ServiceAccount", account) in objects
    granted: dict[str, set[str]] = {}
    for (kind, _), binding in objects.items():
        subjects = binding.get("subjects", []) if kind == "RoleBinding" else []
        if {"kind": "ServiceAccount", "name": account} in subjects:
            role = objects[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
            for rule in role["rules"]:
                if "" in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        granted.setdefault(resource, set()).update(rule["verbs"])
    for resource, verbs in DRIVER_NEEDS.items():
        assert verbs <= granted.get(resource, set()), f"{account} may not {verbs} {resource}"


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_the_jobs_write_to_volumes_the_image_can_write(path: Path) -> None:
    """The image has no object-store connector (no hadoop-aws): every path a job writes is a local
    path on a PersistentVolumeClaim setup.yaml creates (a checkpoint must outlive the pod), mounted
    in each pod that writes it, writable by the image's user; a ReadWriteOnce claim shared with
    executors keeps them on the driver's node."""
    app = _load(path)
    spec = app["spec"]
    claims = {name: obj for (kind, name), obj in _setup().items() if kind == "PersistentVolumeClaim"}
    volumes = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec.get("volumes", [])}
    job_file = spec["mainApplicationFile"].rsplit("/", 1)[-1]
    args = vars(_job(job_file).build_parser().parse_args(spec["arguments"]))
    for argument, roles in WRITERS[job_file].items():
        where = args[argument]
        assert where.startswith("/") or where.startswith("file:///"), f"{argument}={where}: not a local path"
        local = where.removeprefix("file://")
        for role in roles:
            pod = spec[role]
            mounts = {m["mountPath"]: m["name"] for m in pod.get("volumeMounts", [])}
            mount = next((m for m in mounts if local.startswith(m.rstrip("/") + "/")), None)
            assert mount is not None, f"{argument}={where} is on no volume of the {role}"
            claim = volumes[mounts[mount]]
            assert claim in claims, f"{claim} is not created by setup.yaml"
            assert pod["podSecurityContext"]["fsGroup"] == _image_uid(), f"the {role} may not write {mount}"
            if role == "executor" and "ReadWriteMany" not in claims[claim]["spec"]["accessModes"]:
                terms = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                assert {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {
                        "matchLabels": {
                            "spark-role": "driver",
                            "sparkoperator.k8s.io/app-name": app["metadata"]["name"],
                        }
                    },
                } in terms, "executors sharing a ReadWriteOnce claim must run on the driver's node"


def test_the_s3_recipe_matches_the_images_hadoop() -> None:
    """spark_apps/README.md's hadoop-aws version is the Hadoop of the image's pyspark."""
    import pyspark

    pinned = re.search(r'"pyspark==([0-9.]+)"', (APPS / "Dockerfile").read_text())
    assert pinned is not None
    if pyspark.__version__ != pinned.group(1):
        pytest.skip(f"this venv has pyspark {pyspark.__version__}, the image {pinned.group(1)}")
    jars = Path(pyspark.__file__).parent / "jars"
    hadoop = next(
        re.fullmatch(r"hadoop-client-api-(.+)\.jar", j.name) for j in jars.glob("hadoop-client-api-*.jar")
    )
    assert hadoop is not None
    recipe = set(re.findall(r"org\.apache\.hadoop:hadoop-aws:([0-9.]+)", (APPS / "README.md").read_text()))
    assert recipe == {hadoop.group(1)}


def test_the_kustomization_applies_every_manifest_in_any_namespace() -> None:
    """``kubectl apply -k spark_apps/manifests -n X``: every file, and no namespace set (kubectl
    refuses -n for objects that name another one)."""
    kustomization = _load(KUSTOMIZATION)
    assert "namespace" not in kustomization
    assert sorted(kustomization["resources"]) == sorted(p.name for p in [SETUP, *MANIFESTS])


def test_there_is_a_manifest_per_job() -> None:
    files = {_load(m)["spec"]["mainApplicationFile"].rsplit("/", 1)[-1] for m in MANIFESTS}
    assert files == {p.name for p in (APPS / "jobs").glob("*.py")}


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_has_what_the_spark_operator_requires(path: Path) -> None:
    manifest = _load(path)
    jsonschema.validate(manifest, SPARK_APPLICATION)
    spec = manifest["spec"]
    assert spec["type"] == "Python" and spec["mode"] == "cluster" and spec["image"]
    # a streaming query never finishes: the operator must restart it (from its checkpoint)
    assert spec["restartPolicy"]["type"] == "Always" and spec["restartPolicy"]["onFailureRetryInterval"] >= 1
    for role in ("driver", "executor"):
        pod = spec[role]
        assert pod["cores"] >= 1 and pod["memory"], f"{role} resources"
        secrets = [source["secretRef"]["name"] for source in pod.get("envFrom", []) if "secretRef" in source]
        # not the ProducerGroup's kafka-client (README), whose keys are another shape
        assert secrets == ["ordo-spark-kafka"], f"{role} gets the Kafka settings from the Secret"


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_matches_the_image_and_the_job(path: Path) -> None:
    spec = _load(path)["spec"]
    copies = [args.split() for word, args in _final_stage() if word == "COPY"]
    jobs_dir = next(dest for *sources, dest in copies if sources[-1] == "spark_apps/jobs")
    main = spec["mainApplicationFile"]
    assert main.startswith(f"local://{jobs_dir}/")
    job = _job(main.rsplit("/", 1)[-1])
    job.build_parser().parse_args(spec["arguments"])  # exits (fails the test) on bad arguments
    pinned = re.search(r'"pyspark==([0-9.]+)"', (APPS / "Dockerfile").read_text())
    assert pinned is not None and spec["sparkVersion"] == pinned.group(1)


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s.pop("mainApplicationFile"),
        lambda s: s.update(type="python"),
        lambda s: s.update(mainApplicationfile="typo.py"),
        lambda s: s["restartPolicy"].update(onFailureRetryInterval=0),
        lambda s: s["executor"].update(instances=0),
        lambda s: s["driver"].update(memory="lots"),
    ],
)
def test_the_schema_check_can_fail(change: Any) -> None:
    manifest = _load(MANIFESTS[0])
    change(manifest["spec"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(manifest, SPARK_APPLICATION)


def _arg_defaults() -> dict[str, str]:
    return dict(args.split("=", 1) for word, args in _instructions() if word == "ARG" and "=" in args)


def test_dockerfile_bases_are_pinned_and_slim() -> None:
    defaults = _arg_defaults()
    bases = [
        re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], args.split()[0])
        for word, args in _instructions()
        if word == "FROM"
    ]
    for base in bases:
        tag = base.partition(":")[2]
        assert "@sha256:" in base or re.match(r"^\d+\.\d+\.\d+", tag), f"{base} is not pinned to a version"
        assert "latest" not in tag
    assert "slim" in bases[-1]


def test_dockerfile_runs_as_a_non_root_user() -> None:
    users = [args for word, args in _final_stage() if word == "USER"]
    assert users and users[-1] not in ("0", "root") and not users[-1].startswith("0:")


def test_dockerfile_installs_ordo_from_the_repository() -> None:
    steps = _instructions()
    copied = {args.split()[0] for word, args in steps if word == "COPY" and "--from" not in args}
    assert {"pyproject.toml", "sdk", "spark_apps"} <= copied
    runs = [args for word, args in steps if word == "RUN"]
    assert any(re.search(r"pip wheel [^&]* \.(\s|$)", run) for run in runs), "a wheel of this repo"
    installs = [shlex.split(run) for run in runs if "pip install" in run]
    assert any("/wheels/ordo_kafka_spark-*.whl" in words for words in installs)  # the wheel built here
    assert all("--no-cache-dir" in words for words in installs)
    assert any("rm -rf /var/lib/apt/lists/*" in run for run in runs if "apt-get install" in run)


def test_dockerfile_entrypoint_starts_drivers_and_executors() -> None:
    entrypoint = next(args for word, args in _final_stage() if word == "ENTRYPOINT")
    script = next(
        args.split()[-2] for word, args in _final_stage() if word == "COPY" and "entrypoint.sh" in args
    )
    assert (ROOT / script).exists() and (ROOT / script).stat().st_mode & 0o111
    assert "/opt/ordo/entrypoint.sh" in entrypoint
    text = (ROOT / script).read_text()
    assert "driver)" in text and "executor)" in text and "KubernetesExecutorBackend" in text


def test_the_entrypoint_starts_executors_as_sparks_own_does(tmp_path: Path) -> None:
    """SPARK_CONF_DIR, HADOOP_CONF_DIR, SPARK_CLASSPATH and SPARK_EXTRA_CLASSPATH on the executor's
    classpath in Spark's order, SPARK_JAVA_OPT_<n> in numeric order (a fake java prints its argv)."""
    import subprocess

    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    java.chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin", "JAVA_HOME": str(tmp_path / "jdk"), "SPARK_HOME": "/spark",
        "SPARK_CONF_DIR": "/etc/spark", "HADOOP_CONF_DIR": "/etc/hadoop", "SPARK_CLASSPATH": "/first.jar",
        "SPARK_EXTRA_CLASSPATH": "/extra.jar", "SPARK_JAVA_OPT_10": "-Dc=3", "SPARK_JAVA_OPT_2": "-Db=2",
        "SPARK_JAVA_OPT_0": "-Da=1", "SPARK_EXECUTOR_MEMORY": "1g", "SPARK_DRIVER_URL": "spark://d:7078",
        "SPARK_EXECUTOR_ID": "3", "SPARK_EXECUTOR_CORES": "1", "SPARK_APPLICATION_ID": "spark-1",
        "SPARK_EXECUTOR_POD_IP": "10.0.0.9", "SPARK_EXECUTOR_POD_NAME": "exec-3",
    }  # fmt: skip
    done = subprocess.run(
        ["bash", str(APPS / "docker" / "entrypoint.sh"), "executor"],
        env=env, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    argv = done.stdout.splitlines()
    assert argv[:5] == ["-Da=1", "-Db=2", "-Dc=3", "-Xms1g", "-Xmx1g"]
    assert argv[argv.index("-cp") + 1] == "/etc/spark:/etc/hadoop:/first.jar:/spark/jars/*:/extra.jar"
    assert argv[argv.index("-cp") + 2] == "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    assert argv[argv.index("--podName") + 1] == "exec-3"
    without = {
        k: v for k, v in env.items() if k not in ("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "SPARK_CLASSPATH")
    }
    done = subprocess.run(
        ["bash", str(APPS / "docker" / "entrypoint.sh"), "executor"],
        env=without, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    argv = done.stdout.splitlines()
    assert argv[argv.index("-cp") + 1] == "/spark/conf:/spark/jars/*:/extra.jar"
