"""Fixtures of the Kubernetes testbed tests; the shared ones come from ordo.testbed.kube.fixtures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes
import pytest

from ordo.testbed.kube import read_crds
from ordo.testbed.kube.fixtures import KubeCluster
from ordo.testbed.waiting import wait_for

__all__ = ["wait_for"]

CRD_DIR = Path(__file__).parent / "crds"


@pytest.fixture(scope="session")
def test_crds(kube_cluster: KubeCluster) -> list[str]:
    """The test CRDs (Widget, Gadget), created through the API so that it works on real clusters."""
    api = kube_cluster.client()
    ext = kubernetes.client.ApiextensionsV1Api(api)
    names = []
    for crd in read_crds(CRD_DIR):
        try:
            ext.create_custom_resource_definition(crd)
        except kubernetes.client.ApiException as e:
            if e.status != 409:
                raise
        names.append(crd["metadata"]["name"])

    def established() -> bool:
        for name in names:
            conds = ext.read_custom_resource_definition(name).status.conditions or []
            if not any(c.type == "Established" and c.status == "True" for c in conds):
                return False
        return True

    wait_for(established, what="CRDs established")
    return names


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "testbed.ordo.dev/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"topic": "orders", **spec},
    }
