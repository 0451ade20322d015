"""Run as a pod by test_pods.py: ``pod_program.py read-label <label>``, ``annotate-self`` or
``serve <release-file>``."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any


def read_label(label: str) -> None:
    import kubernetes

    kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]  # KUBECONFIG, as the pod launcher sets it
    pod: Any = kubernetes.client.CoreV1Api().read_namespaced_pod(
        os.environ["POD_NAME"], os.environ["POD_NAMESPACE"]
    )
    print(f"label {label}={pod.metadata.labels[label]}", flush=True)


def annotate_self() -> None:
    """What a member must not do: change its own Pod (where its assignment is written)."""
    import kubernetes
    from kubernetes.client import ApiException

    kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
    core: Any = kubernetes.client.CoreV1Api()
    body = {"metadata": {"annotations": {"ordo.dev/assignment": "{}"}}}
    try:
        core.patch_namespaced_pod(os.environ["POD_NAME"], os.environ["POD_NAMESPACE"], body)
        print("patched", flush=True)
    except ApiException as error:
        print(f"refused {error.status}", flush=True)


def serve(release: Path) -> None:
    def on_term(signum: int, frame: FrameType | None) -> None:
        print("got SIGTERM", flush=True)
        while not release.exists():  # let the test look at the terminating pod first
            time.sleep(0.01)
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    faulthandler.register(signal.SIGUSR1)  # as ordo's programs do: PodSet.last_words asks for stacks
    print("ready", flush=True)
    while True:
        time.sleep(0.05)


if __name__ == "__main__":
    if sys.argv[1] == "read-label":
        read_label(sys.argv[2])
    elif sys.argv[1] == "annotate-self":
        annotate_self()
    elif sys.argv[1] == "serve":
        serve(Path(sys.argv[2]))
    else:
        sys.exit(int(sys.argv[2]))
