"""This member's side of the group protocol on Kubernetes (docs/architecture.md).

Downlink: the operator writes the member's assignment into its own pod's annotation; a watch on
that one pod (field selector on its name) delivers it. Uplink: the member renews a Lease named
after its pod, whose annotation acknowledges the generations it has completed. Releasing the
Lease (no holder) tells the operator the member is gone, so its partitions move at once; a member
that steps out (idle past its limit) does the same but keeps watching, and steps in again later.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import watch
from kubernetes.client import ApiClient, CoordinationV1Api, CoreV1Api
from kubernetes.client.exceptions import ApiException

from ..errors import ConfigError
from ..member_wire import (
    ACK_ANNOTATION,
    ASSIGNMENT_ANNOTATION,
    GROUP_LABEL,
    MemberAssignment,
    ProtocolError,
    lease_name,
)
from .lapse import LeaseClock

__all__ = ["Membership"]

_log = logging.getLogger(__name__)
DEFAULT_RENEW_SECONDS = 1.0  # until the first assignment tells the group's session timeout
WATCH_SECONDS = 5  # a watch request ends this often, so close() is noticed


def _micro_time(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Membership:
    """Watches this pod's assignment and keeps its Lease; ``on_assignment`` is called on the
    watch thread with every newer assignment (None when the annotation is removed), ``on_lost``
    when the Lease could not be renewed within the session (the member must stop producing).
    Once the Lease is held again (renewed after a loss, or ``step_in``), the current assignment
    is applied again: the member dropped what it owned meanwhile.

    ``clock`` says until when the Lease can be counted on; past it (the process was stopped, or
    the API was away) the first of ``lapsed()``'s callers, or the next renewal, calls
    ``on_lost`` before anything else: a woken member gives its partitions up before it renews."""

    def __init__(
        self,
        api: ApiClient,
        namespace: str,
        pod: str,
        group: str,
        on_assignment: Callable[[MemberAssignment | None], None],
        on_lost: Callable[[], None],
    ) -> None:
        self.namespace, self.pod, self.group = namespace, pod, group
        self._core = CoreV1Api(api)
        self._leases = CoordinationV1Api(api)
        self._on_assignment, self._on_lost = on_assignment, on_lost
        self._session = 0.0  # unknown until the first assignment
        self._acked: int | None = None
        self._lease: Any = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._renew_now = threading.Event()
        self.clock = LeaseClock()
        self._lapse_lock = threading.Lock()  # one caller gives everything up; the others wait for it
        self._lost = False
        self._holding = True  # False while stepped out: the Lease names no holder
        self._held = False  # whether the last write of the Lease named this member its holder
        self._generation = -1
        self._had_assignment = False
        try:
            own = self._core.read_namespaced_pod(pod, namespace)
        except ApiException as error:
            raise ConfigError(
                f"cannot read this member's own pod {namespace}/{pod} ({error.status} {error.reason}): "
                "check POD_NAME/POD_NAMESPACE and that the pod's ServiceAccount may get/watch its pod"
            ) from None
        meta: Any = own.metadata
        self._pod_uid = meta.uid
        if GROUP_LABEL not in (meta.labels or {}):
            # the operator watches only pods with the label: without it this member is never seen
            _log.warning(
                "pod %s/%s has no label %s: the operator will not count it as a member of %s; "
                "label the pod template %s: %s",
                namespace, pod, GROUP_LABEL, group, GROUP_LABEL, group,
            )  # fmt: skip
        self._renew()  # the Lease exists before the operator can count us in
        self._threads = [
            threading.Thread(target=self._renew_loop, name="ordo-lease", daemon=True),
            threading.Thread(target=self._watch_loop, name="ordo-assignment-watch", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    # -- uplink ------------------------------------------------------------------------------

    def set_session(self, seconds: float) -> None:
        with self._lock:
            changed = seconds != self._session
            self._session = seconds
        if changed:
            self._renew_now.set()

    def ack(self, generation: int) -> None:
        """Acknowledge ``generation``: this member completed it (revoked partitions released)."""
        with self._lock:
            if self._acked is not None and generation <= self._acked:
                return
            self._acked = generation
        self._renew()

    @property
    def lost(self) -> bool:
        return self._lost

    def lapsed(self) -> bool:
        """Whether the Lease may have expired under this member (``clock``). The first caller to
        see it calls ``on_lost``; every caller returns only once that is done."""
        if not self.clock.lapsed(time.monotonic()):
            return False
        with self._lapse_lock:
            if not self.clock.lapsed(time.monotonic()):
                return False  # renewed meanwhile, by the caller that gave everything up
            if not self._lost:
                _log.error(
                    "member %s: its Lease was last renewed too long ago for the session (%gs); "
                    "its partitions may have moved: giving them up",
                    self.pod,
                    self._session,
                )
                self._lost = True
                self._on_lost()
        return True

    def step_out(self) -> None:
        """Give the Lease up (no holder) but stay: acknowledgements go on, renewals stop, so the
        operator counts this member gone and moves its partitions at once."""
        with self._lock:
            self._holding = False
        try:
            self._renew()
        except ApiException as error:  # then the Lease just expires: the session covers it
            _log.warning("member %s: cannot release its Lease: %s", self.pod, error.reason)

    def step_in(self) -> None:
        """Hold the Lease again (on the renewal thread, at once) and apply the current assignment
        again."""
        with self._lock:
            if self._holding:
                return
            self._holding = True
        self._reapply()
        self._renew_now.set()

    def release(self) -> None:
        """Leave the group: the Lease keeps its acknowledgement but names no holder."""
        self._stop.set()
        self._renew_now.set()
        try:
            self._write_lease(holder=None)
        except ApiException as error:  # leaving anyway: the session timeout covers it
            _log.warning("member %s: cannot release its Lease: %s", self.pod, error.reason)

    def _renew(self) -> None:
        with self._lock:
            holding = self._holding
        if holding and self._held:
            self.lapsed()  # after a lapse, the partitions are given up before the Lease is taken again
        started = time.monotonic()
        session = self._write_lease(holder=self.pod if holding else None)
        if session is None:
            return
        self._held = holding  # stepped out, it owns nothing: stepping in needs no giving up first
        if not holding:
            return
        with self._lapse_lock:
            self.clock.renewed(started, session)
            lost, self._lost = self._lost, False
        if lost:
            _log.warning("member %s: its Lease is renewed again; taking its assignment again", self.pod)
            self._reapply()

    def _reapply(self) -> None:
        """The watch's next listing (within WATCH_SECONDS) applies the current assignment again."""
        self._generation = -1

    def _write_lease(self, holder: str | None) -> float | None:
        """Write the Lease; returns the session it was written under (None: not written)."""
        name = lease_name(self.pod)
        with self._lock:
            if holder is not None and self._stop.is_set():
                return None  # released meanwhile: a late renewal must not take the Lease back
            session = self._session
            acked = self._acked
            now = time.time()
            body: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": name,
                    "namespace": self.namespace,
                    "labels": {GROUP_LABEL: self.group},
                    "annotations": {ACK_ANNOTATION: str(acked)} if acked is not None else {},
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "Pod", "name": self.pod, "uid": self._pod_uid}
                    ],
                },
                "spec": {
                    "holderIdentity": holder,
                    "leaseDurationSeconds": max(1, round(session)) if session else None,
                    "renewTime": _micro_time(now) if holder else None,
                },
            }
            for attempt in range(3):
                try:
                    if self._lease is None:
                        self._lease = self._leases.create_namespaced_lease(self.namespace, body)  # type: ignore[arg-type]
                    else:
                        body["metadata"]["resourceVersion"] = self._lease.metadata.resource_version
                        self._lease = self._leases.replace_namespaced_lease(name, self.namespace, body)  # type: ignore[arg-type]
                    return session
                except ApiException as error:
                    if error.status == 409 and attempt < 2:  # exists already, or changed: adopt it
                        self._lease = self._leases.read_namespaced_lease(name, self.namespace)
                    elif error.status == 404 and attempt < 2:
                        self._lease = None
                    else:
                        raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _renew_loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                session = self._session
            interval = session / 3 if session else DEFAULT_RENEW_SECONDS
            self._renew_now.wait(interval)
            self._renew_now.clear()
            with self._lock:
                holding = self._holding
            if self._stop.is_set():
                return
            if not holding:
                continue  # stepped out: nothing to renew
            try:
                self._renew()
            except Exception as error:  # the API is away: keep trying; past the clock, stop
                _log.warning("member %s: cannot renew its Lease: %s", self.pod, error)
                self.lapsed()

    # -- downlink ----------------------------------------------------------------------------

    def _watch_loop(self) -> None:
        selector = f"metadata.name={self.pod}"
        while not self._stop.is_set():
            try:
                pods = self._core.list_namespaced_pod(self.namespace, field_selector=selector)
                for pod in pods.items:
                    self._seen(pod)
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    self._core.list_namespaced_pod,
                    self.namespace,
                    field_selector=selector,
                    resource_version=pods.metadata.resource_version if pods.metadata else None,
                    timeout_seconds=WATCH_SECONDS,
                )
                for event in stream:
                    if self._stop.is_set():
                        return
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._seen(event["object"])
            except Exception as error:  # a watch, or applying what it saw, fails: start again
                if not self._stop.is_set():
                    _log.warning("member %s: watching its pod: %s", self.pod, error, exc_info=True)
                    self._stop.wait(0.5)  # pacing reconnects while the API is away

    def _seen(self, pod: Any) -> None:
        """Apply a newer assignment. The generation counts as seen only once ``on_assignment``
        returned: if it raises, the watch starts again and the same assignment is applied again
        (otherwise the member would keep its Lease but never take, nor acknowledge, it)."""
        value = (pod.metadata.annotations or {}).get(ASSIGNMENT_ANNOTATION)
        if value is None:
            if self._had_assignment:
                self._on_assignment(None)
                self._had_assignment = False
                self._generation = -1
            return
        try:
            assignment = MemberAssignment.from_annotation(value, self.pod)
        except ProtocolError as error:
            _log.error("%s; keeping the current assignment", error)
            return
        if assignment.group != self.group:
            _log.error(
                "member %s: its assignment is for group %r, it belongs to %r; ignoring it",
                self.pod,
                assignment.group,
                self.group,
            )
            return
        if assignment.generation <= self._generation:
            return
        if assignment.settings is not None:
            self.set_session(assignment.settings.session_timeout_seconds)
        self._on_assignment(assignment)
        self._generation = assignment.generation
        self._had_assignment = True
