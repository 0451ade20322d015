"""kopf handlers for ProducerGroup: a daemon per group runs reconcile passes.

Each pass reads the selected pods and the group's Leases from memory (``member_views``: kopf's
watches feed it), asks ``plan_group`` for the next step, writes the annotations it names, then
mirrors the outcome (and each source partition's checkpoint) into status. Watches on pods and
Leases wake the group's daemon at once; a short period covers what no event announces: a Lease
that simply stops being renewed (or is renewed again after it expired), and new checkpoints. A
pass whose inputs did not change since the last one only refreshes the checkpoints.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import kopf
from confluent_kafka import KafkaException
from kubernetes.client import CoordinationV1Api, CoreV1Api
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from ordo.api import (
    API_GROUP,
    Condition,
    PartitionCheckpoint,
    ProducerGroup,
    ProducerGroupSpec,
    ProducerGroupStatus,
)
from ordo.api.common import (
    PAUSE_ANNOTATION,
    PAUSED,
    VERSION,
    ConditionStatus,
    LabelSelector,
    first_error,
    reconciliation_paused,
    set_condition,
)
from ordo.group.checkpoints import Checkpoint, CheckpointLog, ensure_checkpoint_topic
from ordo.member_wire import ASSIGNMENT_ANNOTATION, GROUP_LABEL, MemberAssignment, ProtocolError

from . import metrics
from .config import OperatorConfig
from .crash import crash_point
from .kafka import clients_for
from .kube import KafkaConnectionError, api_client, kafka_config, patch_status
from .member_views import GroupViews, list_items, observe_lease, observe_pod
from .plans.group import GroupPass, PodView, checkpoint_rows, fresh_leases, plan_group
from .plans.sessions import lease_sessions

__all__ = ["register"]

PLURAL = "producergroups"
ANNOTATION_WRITERS = 8  # PATCHes at once: 1,000 members' first assignment one by one took minutes
FIRST_CHECKPOINT_READ_SECONDS = 10.0
"""How long a new group's first pass waits to read its checkpoint topic, so that its first
generation is above what the checkpoints carry (a group created again); past it the pass goes
on, and a later one numbers the assignments above them once read."""
_MEMBERSHIP_PROBLEMS = ("NoMembers", "NoLiveMembers")
_log = logging.getLogger(__name__)


class _Wakers:
    """Which group daemons to wake for a pod or Lease event."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: dict[tuple[str, str], tuple[LabelSelector | None, threading.Event]] = {}

    def register(self, namespace: str, name: str) -> threading.Event:
        with self._lock:
            entry = self._groups.setdefault((namespace, name), (None, threading.Event()))
            return entry[1]

    def select(self, namespace: str, name: str, selector: LabelSelector) -> None:
        with self._lock:
            _, event = self._groups[(namespace, name)]
            self._groups[(namespace, name)] = (selector, event)

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            self._groups.pop((namespace, name), None)

    def wake_group(self, namespace: str, name: str) -> None:
        with self._lock:
            entry = self._groups.get((namespace, name))
        if entry is not None:
            entry[1].set()

    def wake_for_pod(self, namespace: str, labels: dict[str, str]) -> None:
        with self._lock:
            events = [
                event
                for (ns, _), (selector, event) in self._groups.items()
                if ns == namespace and selector is not None and selector.matches(labels)
            ]
        for event in events:
            event.set()


_wakers = _Wakers()


class _QuietWakeups(logging.Filter):
    """kopf logs every handler success; for the wake-up watchers that is a line per Lease renewal."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.INFO or not any(h in record.getMessage() for h in _WAKEUP_HANDLERS)


_WAKEUP_HANDLERS = ("lease_changed", "pod_changed")


def register(settings: OperatorConfig) -> None:
    """Register the handlers with kopf (called once by the operator's entry point)."""
    logging.getLogger("kopf.objects").addFilter(_QuietWakeups())

    @kopf.on.event("coordination.k8s.io", "v1", "leases", labels={GROUP_LABEL: kopf.PRESENT})  # type: ignore[arg-type]
    def lease_changed(
        namespace: str, labels: dict[str, str], body: kopf.Body, type: str | None, **_: Any
    ) -> None:
        # renewals alone wake nothing: the periodic pass judges every Lease's freshness
        if observe_lease(namespace, body, deleted=type == "DELETED"):
            _wakers.wake_group(namespace, labels[GROUP_LABEL])

    # the watch is filtered server-side to pods carrying GROUP_LABEL (setup.py); the filter
    # here says the same for a reader
    @kopf.on.event("", "v1", "pods", labels={GROUP_LABEL: kopf.PRESENT})  # type: ignore[arg-type]
    def pod_changed(
        namespace: str, labels: dict[str, str], body: kopf.Body, type: str | None, **_: Any
    ) -> None:
        # a pod that left a group's selector wakes nobody: that group's periodic pass sees it
        if observe_pod(namespace, body, deleted=type == "DELETED"):
            _wakers.wake_for_pod(namespace, dict(labels))

    @kopf.daemon(API_GROUP, VERSION, PLURAL, id="drive_group", cancellation_timeout=5.0, backoff=2.0)  # type: ignore[arg-type]
    @metrics.count_errors
    def drive_group(
        stopped: kopf.DaemonStopped, name: str, namespace: str, body: kopf.Body, **_: Any
    ) -> None:
        wake = _wakers.register(namespace, name)
        group = _GroupDriver(settings, namespace, name, body)
        try:
            while not stopped:
                period = group.reconcile()
                wake.wait(period)
                wake.clear()
        finally:
            group.close()
            _wakers.forget(namespace, name)
            metrics.forget_group(namespace, name)

    @kopf.on.delete(API_GROUP, VERSION, PLURAL, id="revoke_group")  # type: ignore[arg-type]
    def revoke_group(name: str, namespace: str, body: kopf.Body, **_: Any) -> None:
        """Deleting a group revokes every assignment; the checkpoints stay in Kafka."""
        core = CoreV1Api(api_client())
        revoked = []
        for pod in list_items(core.list_namespaced_pod, namespace)[0]:
            value = (pod["metadata"].get("annotations") or {}).get(ASSIGNMENT_ANNOTATION)
            try:
                ours = value is not None and MemberAssignment.from_annotation(value).group == name
            except ProtocolError:
                ours = False  # malformed: not provably ours, leave it
            if ours:
                _annotate(core, namespace, pod["metadata"]["name"], None)
                revoked.append(pod["metadata"]["name"])
        kopf.event(
            body, type="Normal", reason="Revoked", message=f"assignments revoked from {revoked or 'no pod'}"
        )


class _GroupDriver:
    """The daemon's memory between passes."""

    def __init__(self, settings: OperatorConfig, namespace: str, name: str, body: kopf.Body) -> None:
        self.settings, self.namespace, self.name, self.body = settings, namespace, name, body
        self.core = CoreV1Api(api_client())
        self.views = GroupViews(self.core, CoordinationV1Api(api_client()), namespace, name)
        self.planned: tuple[object, ...] | None = None  # what the last pass planned from
        self.outcome: GroupPass | None = None
        self.writers = ThreadPoolExecutor(ANNOTATION_WRITERS, thread_name_prefix=f"ordo-annotate-{name}")
        status = _status_of(body)
        self.live: set[str] = {m.pod for m in status.members}
        self.reported = ProducerGroupStatus()  # what this driver wrote (its fields set)
        self.problem: tuple[str, str] | None = None
        self.rebalance_started: float | None = None
        self.last_rebalance = status.last_rebalance_seconds
        self.checkpoints: CheckpointLog | None = None
        self.checkpoints_read = -1  # the checkpoint log's version that status shows
        self.group_checkpoints: tuple[int, dict[int, Checkpoint]] = (-1, {})  # (log version, ours)
        self.session_since: dict[str, datetime] = {}  # lease_sessions' memory between passes
        self.kafka_problem: str | None = None
        self.paused_shown: bool | None = None  # what condition ReconciliationPaused says (None: not read yet)
        if any(c.type == "Rebalancing" and c.status == ConditionStatus.TRUE for c in status.conditions):
            kopf.event(
                body,
                type="Normal",
                reason="Resumed",
                message=f"resuming the rebalance of generation {status.generation} left in flight",
            )

    def reconcile(self) -> float:
        """One pass; returns how long to wait for the next one if nothing wakes us."""
        try:
            # without status: ours, and validating 1,000 members' worth every second cost 6 ms
            resource = ProducerGroup.model_validate({k: v for k, v in self.body.items() if k != "status"})
        except ValidationError as error:
            self._report_problem(("InvalidSpec", first_error(error)), generation=None)
            metrics.RESOURCE_READY.labels("ProducerGroup", self.namespace, self.name).set(0)
            return 5.0
        spec = resource.spec
        period = min(1.0, spec.session_timeout_seconds / 4)
        if self._paused():
            self.planned = None  # planned afresh once the pause is lifted
            return period
        _wakers.select(self.namespace, self.name, spec.selector)
        self.views.refresh(spec.selector)
        generation = _status_of(self.body, "generation").generation
        leases, now = self.views.leases(), datetime.now(UTC)
        selected: dict[str, PodView] = {}

        def assignment_of(pod: str) -> str | None:  # asked only of Leases announcing a longer session
            if not selected:
                selected.update((p.name, p) for p in self.views.pods(spec.selector))
            return selected[pod].assignment if pod in selected else None

        sessions = lease_sessions(
            spec.session_timeout_seconds, leases, assignment_of, now, self.session_since
        )
        self.session_since = dict(sessions.since)
        fresh = fresh_leases(leases, now, sessions)
        checkpointed = max(
            (c.generation for c in self._group_checkpoints(spec, first=generation == 0).values()), default=0
        )
        inputs = (spec, generation, self.views.changes(), fresh, checkpointed)
        if inputs == self.planned and self.outcome is not None:
            # nothing it reads changed and no Lease expired or came back: the same outcome, no
            # writes; only the checkpoints may have moved
            if self.checkpoints is None or self.checkpoints.version != self.checkpoints_read:
                self._write_status(resource, self.outcome)
            return period
        pods = self.views.pods(spec.selector)
        outcome = plan_group(self.name, spec, pods, leases, now, generation, sessions, checkpointed)
        # crash points of the handoff's two steps (revoke, then grant), for the crash-resume tests
        step = "revoke" if any(a.revoking for a in outcome.writes.values()) else "grant"
        if outcome.writes:
            crash_point(f"before:{step}")
        writes = [(pod, a.to_annotation()) for pod, a in sorted(outcome.writes.items())]
        found = [_annotate(self.core, self.namespace, *write) for write in writes[:1]]
        if len(writes) > 1:
            crash_point(f"after-first:{step}")
        # the rest side by side: each write is safe in any order (a pass revokes, or grants what
        # nobody holds), and a group's first assignment writes every member's annotation
        found += self.writers.map(lambda w: _annotate(self.core, self.namespace, *w), writes[1:])
        if not all(found):
            self.views.relist_soon()  # a pod we held is gone: its DELETED event may be late
        # a pass that wrote plans again next time whatever its inputs: it must see what came of them
        self.planned, self.outcome = (None if outcome.writes else inputs), outcome
        if outcome.writes:
            crash_point(f"after:{step}")
        self._events(outcome)
        self._track_rebalance(outcome)
        self._write_status(resource, outcome)
        if outcome.writes:
            crash_point(f"after-status:{step}")
        return period

    def close(self) -> None:
        self.writers.shutdown(wait=True)
        if self.checkpoints is not None:
            self.checkpoints.close()

    # -- reading -----------------------------------------------------------------------------

    def _checkpoint_log(self, spec: ProducerGroupSpec) -> CheckpointLog | None:
        """The checkpoint topic's reader (made on first use); None while Kafka cannot be used."""
        if (
            self.checkpoints is None
            or self.checkpoints.topic != spec.checkpoint_topic
            or self.checkpoints.exactly_once != spec.exactly_once
        ):
            try:
                side = clients_for(kafka_config(spec.kafka, self.namespace, self.settings), self.settings)
                ensure_checkpoint_topic(side.admin, spec.checkpoint_topic)
                if self.checkpoints is not None:
                    self.checkpoints.close()
                self.checkpoints = CheckpointLog(side.config, spec.checkpoint_topic, spec.exactly_once)
                self.group_checkpoints = (-1, {})
                self.kafka_problem = None
            except (KafkaConnectionError, ConnectionError, RuntimeError, KafkaException) as error:
                self.kafka_problem = str(error)
                return None
        return self.checkpoints

    def _group_checkpoints(self, spec: ProducerGroupSpec, first: bool = False) -> dict[int, Checkpoint]:
        """This group's checkpoints as read so far, by source partition. A new group's ``first``
        pass reads the topic to its end first (``FIRST_CHECKPOINT_READ_SECONDS``)."""
        log = self._checkpoint_log(spec)
        if log is None:
            return {}
        if first and self.group_checkpoints[0] < 0 and not log.catch_up(FIRST_CHECKPOINT_READ_SECONDS):
            _log.warning(
                "%s/%s: checkpoint topic not read to its end: %s", self.namespace, self.name, log.describe()
            )
        version = log.version
        if version != self.group_checkpoints[0]:
            self.group_checkpoints = (version, log.of_group(self.namespace, self.name))
        return self.group_checkpoints[1]

    def _checkpoint_status(
        self, resource: ProducerGroup, owners: dict[int, str]
    ) -> tuple[list[PartitionCheckpoint], int]:
        """``status.checkpoints`` (see ``checkpoint_rows``) and how many source partitions have a
        checkpoint, read from the checkpoint topic."""
        spec = resource.spec
        log = self._checkpoint_log(spec)
        if log is None:
            return [], 0
        found = self._group_checkpoints(spec)
        self.checkpoints_read = self.group_checkpoints[0]
        latest = {
            p: c.checkpoint
            for p, c in found.items()
            if p < spec.source_partitions and c.checkpoint is not None
        }
        return checkpoint_rows(spec.source_partitions, latest, owners), len(latest)

    # -- reporting ---------------------------------------------------------------------------

    def _events(self, outcome: GroupPass) -> None:
        live = set(outcome.live)
        for pod in sorted(self.live - live):
            kopf.event(
                self.body,
                type="Warning",
                reason="MemberLost",
                message=f"member {pod} is gone (pod not Ready, deleted, or its Lease expired or released)",
            )
        for pod in sorted(live - self.live):
            kopf.event(self.body, type="Normal", reason="MemberJoined", message=f"member {pod} joined")
        self.live = live
        if outcome.writes:
            moves = ", ".join(f"{pod}={list(a.partitions)}" for pod, a in sorted(outcome.writes.items()))
            kopf.event(
                self.body,
                type="Normal",
                reason="Rebalanced",
                message=f"generation {outcome.generation}: {moves}",
            )
        for error in outcome.invalid_annotations:
            kopf.event(self.body, type="Warning", reason="InvalidAnnotation", message=error)

    def _track_rebalance(self, outcome: GroupPass) -> None:
        now = time.monotonic()
        if not outcome.settled and self.rebalance_started is None:
            self.rebalance_started = now
        elif outcome.settled and self.rebalance_started is not None:
            self.last_rebalance = round(now - self.rebalance_started, 3)
            self.rebalance_started = None
            metrics.record_rebalance(
                self.namespace, self.name, self.last_rebalance, len(outcome.live), outcome.generation
            )

    def _paused(self) -> bool:
        """Whether the pause annotation holds this group now: assignments stay as they are, and
        nothing is planned. Condition ReconciliationPaused and an Event when that changes (the
        status is read only then, and once at the start)."""
        paused = reconciliation_paused(self.body.get("metadata") or {})
        if self.paused_shown is None:
            shown = _status_of(self.body, "conditions").conditions
            self.paused_shown = any(c.type == PAUSED and c.status == ConditionStatus.TRUE for c in shown)
        if paused == self.paused_shown:
            return paused
        if paused:
            reason, message = (
                PAUSED,
                f"the {PAUSE_ANNOTATION} annotation pauses it: assignments stay as they are",
            )
        else:
            reason, message = (
                "ReconciliationResumed",
                f"the {PAUSE_ANNOTATION} annotation is gone: reconciling again",
            )
        conditions = set_condition(
            _status_of(self.body, "conditions").conditions, PAUSED, paused, reason, message
        )
        self._patch(ProducerGroupStatus(conditions=conditions))
        kopf.event(self.body, type="Normal", reason=reason, message=message)
        self.paused_shown = paused
        return paused

    def _report_problem(self, problem: tuple[str, str] | None, generation: int | None) -> None:
        if problem != self.problem and problem is not None:
            kopf.event(self.body, type="Warning", reason=problem[0], message=problem[1])
        self.problem = problem
        if problem is not None and generation is None:  # an invalid spec: only the conditions change
            conditions = _conditions(_status_of(self.body, "conditions").conditions, None, problem, None)
            self._patch(ProducerGroupStatus(conditions=conditions))

    def _write_status(self, resource: ProducerGroup, outcome: GroupPass) -> None:
        generation = resource.metadata.get("generation")
        owners = {p: m.pod for m in outcome.members for p in m.partitions}
        checkpoints, checkpointed = self._checkpoint_status(resource, owners)
        problem = outcome.problem
        # a Kafka connection that cannot work (e.g. a missing Secret) is the first thing to fix:
        # it is not to hide behind "no members" (members need the same Secret)
        if self.kafka_problem is not None and (problem is None or problem[0] in _MEMBERSHIP_PROBLEMS):
            problem = ("InvalidKafkaConnection", self.kafka_problem)
        self._report_problem(problem, generation=outcome.generation)
        new = ProducerGroupStatus(
            generation=outcome.generation,
            member_count=len(outcome.live),
            members=outcome.members,
            standby=outcome.standby,
            unassigned=outcome.unassigned,
            checkpoints=checkpoints,
            checkpointed=checkpointed,
            observed_generation=generation,
            last_rebalance_seconds=self.last_rebalance,
            conditions=_conditions(
                _status_of(self.body, "conditions").conditions, outcome, problem, generation
            ),
        )
        self._patch(new)
        metrics.record_group_status(
            self.namespace, self.name, members=len(outcome.live), generation=outcome.generation,
            unassigned=len(outcome.unassigned), ready=outcome.settled and problem is None,
        )  # fmt: skip

    def _patch(self, status: ProducerGroupStatus) -> None:
        written = self.reported
        fields = status.model_fields_set
        if all(f in written.model_fields_set and getattr(written, f) == getattr(status, f) for f in fields):
            return  # nothing new: no write (compared as models: dumping 1,000 members took 2 ms)
        patch_status(PLURAL, self.namespace, self.name, status)
        self.reported = written.model_copy(update={f: getattr(status, f) for f in fields})


def _conditions(
    conditions: list[Condition],
    outcome: GroupPass | None,
    problem: tuple[str, str] | None,
    generation: int | None,
) -> list[Condition]:
    if outcome is None:
        assert problem is not None
        conditions = set_condition(conditions, "Ready", False, problem[0], problem[1], generation)
        conditions = set_condition(conditions, "Degraded", True, problem[0], problem[1], generation)
    else:
        rebalancing = not outcome.settled and problem is None
        ready = outcome.settled and problem is None
        summary = (
            f"{len(outcome.live)} member(s), generation {outcome.generation}, "
            f"{len(outcome.standby)} standby, {len(outcome.unassigned)} unassigned"
        )
        reason, message = problem or (("Rebalancing", summary) if rebalancing else ("Assigned", summary))
        conditions = set_condition(conditions, "Ready", ready, reason, message, generation)
        conditions = set_condition(conditions, "Rebalancing", rebalancing, reason, message, generation)
        conditions = set_condition(conditions, "Degraded", problem is not None, reason, message, generation)
    return conditions


def _status_of(body: kopf.Body, *fields: str) -> ProducerGroupStatus:
    """The group's status as last written (the rest default): only ``fields`` (camelCase; all the
    driver reads when none) are validated, not the driver's own output (1,000 members' worth of
    members and checkpoints every second cost 6 ms)."""
    status = body.get("status") or {}
    wanted = fields or ("generation", "members", "lastRebalanceSeconds", "conditions")
    return ProducerGroupStatus.model_validate({k: status[k] for k in wanted if k in status})


def _annotate(core: CoreV1Api, namespace: str, pod: str, value: str | None) -> bool:
    """Write a pod's assignment; False if the pod is gone. The pod as written goes into the
    cache at once: the next pass must not plan from the annotation it replaced."""
    try:
        response: Any = core.patch_namespaced_pod(
            pod,
            namespace,
            {"metadata": {"annotations": {ASSIGNMENT_ANNOTATION: value}}},
            _preload_content=False,
        )
    except ApiException as error:
        if error.status != 404:  # a pod that is gone needs no assignment
            raise
        return False
    observe_pod(namespace, json.loads(response.data))
    return True
