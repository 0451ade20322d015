"""A Kubernetes API emulator for tests: kopf and the official client use it unmodified through a
kubeconfig. See :class:`KubeEmulator`; the HTTP layer's docstring (``server.py``) says why it is
not built on kmock."""

from .cluster import Cluster
from .errors import ApiError
from .faults import Fault, Faults, add_remote, clear_remote
from .launcher import DEFAULT_TOKEN, KubeEmulator, default_crd_dir, kubeconfig, read_crds, run_foreground

__all__ = [
    "DEFAULT_TOKEN",
    "ApiError",
    "Cluster",
    "Fault",
    "Faults",
    "KubeEmulator",
    "add_remote",
    "clear_remote",
    "default_crd_dir",
    "kubeconfig",
    "read_crds",
    "run_foreground",
]
