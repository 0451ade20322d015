"""spark_apps/manifests/setup.yaml applied, as shipped, to the testbed's kube-apiserver (RBAC on)
in the test's namespace: every object is accepted, and the ServiceAccount the SparkApplications
name may do what Spark's driver does (``kubectl auth can-i``). The SparkApplication CRD is not
installed there; tests/unit/test_spark_packaging.py checks those manifests' fields."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.kube.identity import wait_rbac_effective

pytestmark = pytest.mark.testbed

MANIFESTS = Path(__file__).parents[2] / "spark_apps" / "manifests"
# (verb, resource) pairs Spark's Kubernetes backend uses as the driver
DRIVER_ACTIONS = [
    ("create", "pods"),
    ("watch", "pods"),
    ("delete", "pods"),
    ("create", "services"),
    ("patch", "services"),  # Spark 4 creates the driver's Service by server-side apply
    ("patch", "configmaps"),
    ("delete", "services"),
    ("create", "configmaps"),
    ("delete", "configmaps"),
    ("create", "persistentvolumeclaims"),
]


def kubectl(kube: Kube, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl is not installed")
    return subprocess.run(
        [found, *args], input=stdin, capture_output=True, text=True, timeout=90, check=False,
        env={**os.environ, "KUBECONFIG": str(kube.kubeconfig_path)},
    )  # fmt: skip


def test_setup_applies_and_the_account_may_run_spark(kube: Kube) -> None:
    """As spark_apps/README.md applies it: ``kubectl apply -f setup.yaml -n <namespace>``."""
    setup = (MANIFESTS / "setup.yaml").read_text()
    applied = kubectl(kube, "apply", "-f", str(MANIFESTS / "setup.yaml"), "-n", kube.namespace)
    assert applied.returncode == 0, applied.stderr
    objects = [
        {**o, "metadata": {**o["metadata"], "namespace": kube.namespace}} for o in yaml.safe_load_all(setup)
    ]
    wait_rbac_effective(kube.api, objects)  # the authorizer lags the apply
    accounts = {
        yaml.safe_load(m.read_text())["spec"]["driver"]["serviceAccount"] for m in MANIFESTS.glob("*-*.yaml")
    }
    assert accounts == {"ordo-spark"}
    for account in accounts:
        who = f"--as=system:serviceaccount:{kube.namespace}:{account}"
        for verb, resource in DRIVER_ACTIONS:
            allowed = kubectl(kube, "auth", "can-i", verb, resource, "-n", kube.namespace, who)
            assert allowed.stdout.strip() == "yes", f"{account} may not {verb} {resource}: {allowed.stderr}"
        # and nothing outside its namespace
        elsewhere = kubectl(kube, "auth", "can-i", "create", "pods", "-n", "default", who)
        assert elsewhere.stdout.strip() == "no"
    claims = kubectl(kube, "get", "pvc", "-n", kube.namespace, "-o", "name")
    assert set(claims.stdout.split()) == {
        "persistentvolumeclaim/ordo-ordered-pipeline-data",
        "persistentvolumeclaim/ordo-exactly-once-sink-data",
    }
