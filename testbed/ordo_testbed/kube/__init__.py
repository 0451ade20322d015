"""A real Kubernetes API server for tests, envtest-like: etcd, kube-apiserver and the namespace and
garbage collectors of kube-controller-manager, built from source once per machine (``binaries``),
no nodes. kopf, the official client and kubectl use it through an HTTPS kubeconfig.

    with KubeApiServer() as kube:                       # ordo's CRDs from crds/, Established
        api = kubernetes.config.new_client_from_config(str(kube.kubeconfig_path))
        kube.apply_crds(read_crds("more/crds"))

Foreground (``ordo testbed up`` starts it with Kafka): ``python -m ordo_testbed.kube --port 6443
--state-dir DIR``. Pods are local processes (``ordo_testbed.pods``); ``kubelet`` serves placeholder
Pods as a real cluster's would; ``fixtures`` has the pytest fixtures.
"""

from ordo_testbed.kube.apiserver import KubeApiServer, default_crd_dir, kubeconfig, read_crds, run_foreground
from ordo_testbed.kube.binaries import KubeSetupError

__all__ = ["KubeApiServer", "KubeSetupError", "default_crd_dir", "kubeconfig", "read_crds", "run_foreground"]
