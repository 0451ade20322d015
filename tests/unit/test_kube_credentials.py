"""Kubernetes credentials (ordo.kube_credentials): none at all is a ConfigError saying so."""

from __future__ import annotations

from pathlib import Path

import pytest

from ordo.errors import ConfigError
from ordo.kube_credentials import kubernetes_client


def test_no_cluster_and_no_kubeconfig_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(
        ConfigError, match="no Kubernetes credentials: not in a cluster and no usable kubeconfig"
    ):
        kubernetes_client()
