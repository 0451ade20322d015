"""A Kubernetes API emulator for tests: kopf and the official client use it unmodified through a
kubeconfig (insecure http + bearer token). Why it is not built on kmock: see ``server.py``.

    with KubeEmulator() as kube:                        # CRDs from the repo's crds/ folder
        api = kubernetes.config.new_client_from_config(str(kube.kubeconfig_path))
        kube.load_crds("more/crds")                     # any time, also via the API
        kube.faults.add(verb="patch", resource="pods/status", code=500, count=2)
        kube.call(lambda cluster: cluster.store.rv)     # state access on the server's loop

Foreground (``ordo testbed up``): ``run_foreground(port=6443, state_dir=...)`` or
``python -m ordo.testbed.kube --port 6443 --state-dir DIR``. From another process, faults go
through ``add_remote(url, token, **fault)`` / ``clear_remote(url, token)``.

Modules: ``store`` (objects, resourceVersions, history, watch fan-out), ``cluster`` (API
semantics), ``schema`` (OpenAPI pruning/defaulting/validation), ``patch``, ``selectors``,
``discovery``, ``tables`` (printer columns), ``events`` (core <-> events.k8s.io), ``faults``,
``state`` (persistence), ``server`` (HTTP), ``launcher``, ``fixtures`` (pytest).
"""

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
