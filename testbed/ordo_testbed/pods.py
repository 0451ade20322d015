"""Pods as local processes: each "pod" is a Pod object in the testbed's API server plus a local
process, kept consistent the way a kubelet and the node controller would keep them.

- start: Pod created (bound to a fake node), process started with POD_NAME, POD_NAMESPACE,
  POD_IP and KUBECONFIG, then the Pod is marked Running and Ready with podIP 127.0.0.1.
- sigterm: Pod deletion starts (deletionTimestamp, Terminating) and it turns not Ready, then the
  process gets SIGTERM; when it exits the Pod is removed. Past the grace period it gets SIGKILL.
- sigkill: the process dies at once; the Pod turns not Ready (phase Failed) and, unless
  ``delete=False``, is removed as the node controller eventually would.
- a process that exits by itself leaves its Pod Succeeded/Failed and not Ready (restartPolicy Never).
- a Pod deleted through the API by anyone: its process gets SIGTERM (SIGKILL if removed at once).
- pause/resume: SIGSTOP/SIGCONT; the Pod stays Ready, as a kubelet does not notice a stopped process.

On a real cluster no kubelet of ours can own a Pod, so with ``placeholder_image`` each pod is a
real Pod running that image (pause: it does nothing), scheduled and made Ready by the cluster, and
the process runs here bound to it by POD_NAME. The cluster owns such a Pod's status; the Pod is
deleted when its process exits (by itself or killed), which the cluster turns into "gone".

Processes run in their own session; :meth:`PodSet.close` kills each one's process group by the
PID it started (never by name).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from ordo.member_wire import GROUP_LABEL
from ordo_testbed.waiting import wait_for

log = logging.getLogger(__name__)
NODE_NAME = "ordo-testbed-node"
POD_IP = "127.0.0.1"
PLACEHOLDER_IMAGE = "registry.k8s.io/pause:3.10"
PODSET_LABEL = "ordo.dev/podset"  # which PodSet made a Pod: its kubelet watches those only


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def pod_ready(pod: Any) -> bool:
    """Whether a ``V1Pod`` has its Ready condition True."""
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _conditions(ready: bool) -> list[dict[str, str]]:
    now = _now()
    flag = "True" if ready else "False"
    out = [{"type": "PodScheduled", "status": "True"}, {"type": "Initialized", "status": "True"}]
    out += [{"type": "ContainersReady", "status": flag}, {"type": "Ready", "status": flag}]
    return [{**c, "lastTransitionTime": now} for c in out]


def _container(ready: bool, state: dict[str, Any]) -> dict[str, Any]:
    return {"name": "main", "ready": ready, "started": ready, "restartCount": 0, "state": state,
            "image": "local-process", "imageID": ""}  # fmt: skip


class Pod:
    """One pod: its Pod object and its process. Made by :meth:`PodSet.start`."""

    def __init__(self, podset: PodSet, name: str, argv: Sequence[str], log_dir: Path, grace: int):
        self.podset = podset
        self.name = name
        self.namespace = podset.namespace
        self.argv = list(argv)
        self.grace = grace
        self.stdout_path = log_dir / f"{name}.out"
        self.stderr_path = log_dir / f"{name}.err"
        self.process: subprocess.Popen[bytes] | None = None
        self._terminating = False
        self._delete_on_exit = False
        self._exited = threading.Event()
        self._lock = threading.Lock()
        self._monitor: threading.Thread | None = None

    # --- process state ------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.poll() if self.process is not None else None

    def wait(self, timeout: float | None = None) -> int:
        """The exit code; raises ``subprocess.TimeoutExpired`` when still running after ``timeout``."""
        assert self.process is not None
        code = self.process.wait(timeout)
        self._exited.wait(10)  # and the Pod object has been updated accordingly
        return code

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace") if self.stdout_path.exists() else ""

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def events(self, kind: str) -> list[dict[str, Any]]:
        """The JSON lines of ``{"event": kind, ...}`` the program printed (the sandbox's members
        print one per rebalance), in order."""
        lines = [json.loads(line) for line in self.stdout().splitlines() if line.startswith("{")]
        return [line for line in lines if line.get("event") == kind]

    def read(self) -> Any:
        """The Pod object as the API has it now (a ``V1Pod``); raises ApiException(404) once gone."""
        return self.podset.core.read_namespaced_pod(self.name, self.namespace)

    # --- signals ------------------------------------------------------------------------------

    def sigterm(self, grace: int | None = None) -> None:
        """Graceful termination, as ``kubectl delete pod`` causes it."""
        grace = self.grace if grace is None else grace
        self.podset.core.delete_namespaced_pod(self.name, self.namespace, grace_period_seconds=grace)
        self._terminate(grace)

    def _terminate(self, grace: int) -> None:
        """The kubelet's part of a graceful deletion (once, whoever asked for it)."""
        with self._lock:
            if self._terminating:
                return
            self._terminating = True
        try:
            self._patch_status({"conditions": _conditions(False)})
        except Exception as e:  # grace 0: already gone
            if getattr(e, "status", None) != 404:
                raise
        self._signal(signal.SIGTERM)
        timer = threading.Timer(grace, self._signal, args=(signal.SIGKILL,))
        timer.daemon = True
        timer.start()

    def sigkill(self, delete: bool = True) -> None:
        """Sudden death: the process is killed, the Pod turns not Ready, then (optionally) goes away."""
        self._delete_on_exit = delete
        self._signal(signal.SIGKILL)
        self._exited.wait(10)

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: signal.Signals) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, sig)

    # --- kubelet ------------------------------------------------------------------------------

    def _start(
        self, labels: Mapping[str, str], annotations: Mapping[str, str], env: Mapping[str, str]
    ) -> None:
        podset = self.podset
        placeholder = podset.placeholder_image
        container: dict[str, Any] = {"name": "main", "image": placeholder or "local-process"}
        spec: dict[str, Any] = {"restartPolicy": "Never", "terminationGracePeriodSeconds": self.grace}
        if placeholder is None:
            spec["nodeName"] = podset.node_name
            container["command"] = self.argv
        spec["containers"] = [container]
        labels = {**labels, PODSET_LABEL: podset.id}
        if "ORDO_GROUP" in env:  # a ProducerGroup member: the label the operator's pod watch selects
            labels = {GROUP_LABEL: env["ORDO_GROUP"], **labels}
        metadata = {"name": self.name, "labels": labels, "annotations": dict(annotations)}
        podset.core.create_namespaced_pod(self.namespace, {"metadata": metadata, "spec": spec})
        if placeholder is not None:
            self._await_ready(podset.ready_timeout)
        full_env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            **env,
            "POD_NAME": self.name,
            "POD_NAMESPACE": self.namespace,
            "POD_IP": POD_IP,
            "KUBECONFIG": str(podset.process_kubeconfig),
        }
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env=full_env,
                start_new_session=True,
            )
        started = _now()
        running = {
            **_container(ready=True, state={"running": {"startedAt": started}}),
            "containerID": f"process://{self.process.pid}",
        }
        self._patch_status(
            {
                "phase": "Running",
                "podIP": POD_IP,
                "podIPs": [{"ip": POD_IP}],
                "hostIP": POD_IP,
                "startTime": started,
                "conditions": _conditions(True),
                "containerStatuses": [running],
            }
        )
        self._monitor = threading.Thread(target=self._watch_process, name=f"pod-{self.name}", daemon=True)
        self._monitor.start()

    def _await_ready(self, timeout: float) -> None:
        """A placeholder Pod: wait for the cluster to schedule it and report it Ready."""
        try:
            wait_for(self._ready, timeout, f"pod {self.name} to be Ready", step=0.5)
        except AssertionError:
            status = self.read().status
            waiting = [
                f"{c.state.waiting.reason}: {c.state.waiting.message or ''}".strip(": ")
                for c in (status.container_statuses or [])
                if c.state is not None and c.state.waiting is not None
            ]
            with contextlib.suppress(Exception):
                self.podset.core.delete_namespaced_pod(self.name, self.namespace, grace_period_seconds=0)
            raise RuntimeError(
                f"pod {self.namespace}/{self.name} ({self.podset.placeholder_image}) is not Ready after "
                f"{timeout:g}s: phase {status.phase}" + (f", {'; '.join(waiting)}" if waiting else "")
            ) from None

    def _ready(self) -> bool:
        return pod_ready(self.read())

    def _watch_process(self) -> None:
        assert self.process is not None
        code = self.process.wait()
        try:
            terminated = {
                "exitCode": code,
                "finishedAt": _now(),
                "reason": "Completed" if code == 0 else "Error",
            }
            container = _container(ready=False, state={"terminated": terminated})
            self._patch_status(
                {
                    "phase": "Succeeded" if code == 0 else "Failed",
                    "conditions": _conditions(False),
                    "containerStatuses": [container],
                }
            )
            if self._terminating or self._delete_on_exit or self.podset.placeholder_image is not None:
                self.podset.core.delete_namespaced_pod(self.name, self.namespace, grace_period_seconds=0)
        except Exception as e:  # the Pod may be gone or the cluster stopped: nothing left to report
            if getattr(e, "status", 404) != 404 and not self.podset.closing:
                log.warning("could not report the exit of pod %s: %s", self.name, e)
        finally:
            self._exited.set()

    def _patch_status(self, status: dict[str, Any]) -> None:
        if self.podset.placeholder_image is not None:
            return  # the cluster's kubelet owns a real Pod's status
        self.podset.core.patch_namespaced_pod_status(self.name, self.namespace, {"status": status})

    def _kill_group(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)  # its own session: pgid == pid
            self.process.wait(10)


class PodSet:
    """Starts pods in one namespace and cleans them all up on :meth:`close` (also a context manager)."""

    def __init__(
        self,
        kubeconfig_path: Path | str,
        namespace: str = "default",
        log_dir: Path | str | None = None,
        node_name: str = NODE_NAME,
        placeholder_image: str | None = None,
        ready_timeout: float = 180.0,
        process_kubeconfig: Path | str | None = None,
    ):
        """``placeholder_image``: a real cluster (see the module's doc); ``ready_timeout`` bounds the
        wait for each placeholder Pod to be scheduled, pulled and Ready; ``process_kubeconfig``: the
        identity the processes use (default: the set's own, ``kubeconfig_path``), as a Pod's
        ServiceAccount would give them one."""
        import kubernetes

        self.id = uuid.uuid4().hex[:10]
        self.placeholder_image = placeholder_image
        self.ready_timeout = ready_timeout
        self.kubeconfig_path = Path(kubeconfig_path)
        self.process_kubeconfig = Path(process_kubeconfig or kubeconfig_path)
        self.namespace = namespace
        self.node_name = node_name
        self.log_dir = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="ordo-pods-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        config: Any = kubernetes.config
        self.api: Any = config.new_client_from_config(str(self.kubeconfig_path))
        self.core: Any = kubernetes.client.CoreV1Api(self.api)
        self.pods: list[Pod] = []
        self.closing = False
        self._stream: Any = None
        self._kubelet: threading.Thread | None = None

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        grace: int = 30,
    ) -> Pod:
        if self._kubelet is None:
            since = self.core.list_namespaced_pod(self.namespace, limit=1).metadata.resource_version
            self._kubelet = threading.Thread(
                target=self._watch_pods, args=(since,), name="kubelet", daemon=True
            )
            self._kubelet.start()
        pod = Pod(self, name, argv, self.log_dir, grace)
        self.pods.append(pod)
        pod._start(labels or {}, annotations or {}, env or {})
        return pod

    def _watch_pods(self, since: str) -> None:
        """Like a kubelet: a Pod deleted through the API gets its process terminated (gracefully,
        or killed when the Pod is removed at once)."""
        selector = f"{PODSET_LABEL}={self.id}"
        while not self.closing:
            try:
                self._stream = self.core.list_namespaced_pod(
                    self.namespace, watch=True, label_selector=selector, resource_version=since,
                    allow_watch_bookmarks=True, timeout_seconds=300, _preload_content=False,
                )  # fmt: skip
                for line in self._stream:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        since = self.core.list_namespaced_pod(
                            self.namespace, limit=1
                        ).metadata.resource_version
                        break
                    since = obj["metadata"]["resourceVersion"]
                    self._on_pod_event(event["type"], obj)
            except Exception as e:
                if not self.closing:
                    log.debug("kubelet watch interrupted: %s", e)

    def _on_pod_event(self, type_: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata", {})
        pod = next((p for p in self.pods if p.name == meta.get("name")), None)
        if pod is None or pod.returncode is not None or type_ == "BOOKMARK":
            return
        if type_ == "DELETED":
            pod._signal(signal.SIGKILL)  # removed at once (grace 0): the container is killed
        elif meta.get("deletionTimestamp"):
            pod._terminate(int(meta.get("deletionGracePeriodSeconds") or 0))

    def last_words(self, lines: int = 40) -> str:
        """Each pod's state and the tails of its output, after asking the running ones to dump
        every thread's stack (SIGUSR1; ordo's programs register faulthandler for it): what a
        failed wait needs to be understood."""
        sizes = {pod: _size(pod.stderr_path) for pod in self.pods}
        running = [pod for pod in self.pods if pod.returncode is None]
        for pod in running:
            pod._signal(signal.SIGUSR1)
        with contextlib.suppress(AssertionError):  # a pod that wrote nothing in 3 s: show what there is
            wait_for(lambda: all(_size(pod.stderr_path) > sizes[pod] for pod in running), 3, "stacks", 0.1)
        out = []
        for pod in self.pods:
            out.append(f"--- pod {pod.name} (exit code {pod.returncode})")
            out += pod.stdout().splitlines()[-lines:]
            out += pod.stderr().splitlines()[-lines:]
        return "\n".join(out)

    def close(self) -> None:
        """Kill every process this set started (by PID/process group) and delete their Pods."""
        self.closing = True
        if self._stream is not None:
            with contextlib.suppress(Exception):
                self._stream.shutdown()  # unblocks the kubelet thread's read
        for pod in self.pods:
            pod._kill_group()
        for pod in self.pods:
            pod._exited.wait(5)
            with contextlib.suppress(Exception):
                self.core.delete_namespaced_pod(pod.name, pod.namespace, grace_period_seconds=0)
        if self._kubelet is not None:
            self._kubelet.join(5)
        self.api.close()

    def __enter__(self) -> PodSet:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0
