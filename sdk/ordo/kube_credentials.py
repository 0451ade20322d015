"""Kubernetes credentials, found the same way by a ProducerGroup's members and the operator: the
pod's service account in a cluster, else the kubeconfig (``KUBECONFIG`` or ~/.kube/config)."""

from __future__ import annotations

import kubernetes
from kubernetes.client import ApiClient

from .errors import ConfigError

__all__ = ["kubernetes_client"]


def kubernetes_client() -> ApiClient:
    """A new API client with this process's credentials; ConfigError when there are none."""
    try:
        kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
    except kubernetes.config.ConfigException:
        try:
            kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
        except (kubernetes.config.ConfigException, FileNotFoundError) as error:
            raise ConfigError(
                f"no Kubernetes credentials: not in a cluster and no usable kubeconfig ({error})"
            ) from None
    return ApiClient()
