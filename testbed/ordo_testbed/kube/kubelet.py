"""A stand-in for a real cluster's kubelet, serving placeholder Pods on the testbed's API server.

With it, the paths written for a real cluster (:class:`ordo_testbed.pods.PodSet` with a
placeholder image, ``ordo sandbox --kubeconfig``) run against the testbed: a Pod running the
placeholder image turns Running and Ready, and a Pod being deleted is removed at once (pause
stops on SIGTERM).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from ordo_testbed.pods import PLACEHOLDER_IMAGE, pod_ready

__all__ = ["PlaceholderKubelet"]

_log = logging.getLogger(__name__)

_RUNNING = {
    "phase": "Running",
    "podIP": "10.244.0.9",
    "conditions": [
        {"type": t, "status": "True"} for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
    ],
}


class PlaceholderKubelet:
    """Runs the placeholder Pods of one namespace until :meth:`close` (also a context manager)."""

    def __init__(self, kubeconfig: Path | str, namespace: str, image: str = PLACEHOLDER_IMAGE) -> None:
        import kubernetes

        config: Any = kubernetes.config
        self._api: Any = config.new_client_from_config(str(kubeconfig))
        self._core: Any = kubernetes.client.CoreV1Api(self._api)
        self.namespace = namespace
        self.image = image
        self.served: set[str] = set()  # the Pods it made Ready
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="placeholder-kubelet", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):  # a control loop's pace, as a kubelet's pod workers have
            try:
                self._sync()
            except Exception as error:  # e.g. a Pod deleted meanwhile (404): the next pass sees it
                if getattr(error, "status", None) != 404:
                    _log.warning("placeholder kubelet: %s", error)

    def _sync(self) -> None:
        for pod in self._core.list_namespaced_pod(self.namespace).items:
            if pod.spec.containers[0].image != self.image:
                continue
            name = pod.metadata.name
            if pod.metadata.deletion_timestamp is not None:
                self._core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
            elif not pod_ready(pod):
                self._core.patch_namespaced_pod_status(name, self.namespace, {"status": _RUNNING})
                self.served.add(name)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._api.close()

    def __enter__(self) -> PlaceholderKubelet:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
