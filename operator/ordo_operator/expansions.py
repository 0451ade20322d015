"""kopf handlers for OrderedTopicExpansion: a daemon per expansion drives the pure state machine.

Each pass reads the world, asks ``plan_expansion`` for the next step, records the step in status,
and only then performs its effect, so a killed operator resumes from status and the world. The
publish is recorded after (``Step.record``): the pass that sees the last producer fenced reads
the thresholds and writes the publish with no API-server call in between.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, NoReturn, cast

import kopf
from pydantic import ValidationError

from ordo.api import (
    API_GROUP,
    Condition,
    ExpansionPhase,
    OrderedTopicExpansion,
    OrderedTopicExpansionStatus,
)
from ordo.api.common import VERSION, first_error, reconciliation_paused, set_condition
from ordo.epochs.liveness import ProducerLiveness, ProducerReport

from . import metrics
from .config import OperatorConfig
from .crash import crash_point
from .kafka import KafkaSide, clients_for, known_sides
from .kafka_topics import follow_completed, follow_created
from .kube import (
    KafkaConnectionError,
    kafka_config,
    namespace_terminating,
    patch_status,
    post_operator_event,
)
from .plans.autoscale_peers import expansion_ended_at
from .plans.expansion import (
    Effect,
    ExpansionState,
    ProducerView,
    Step,
    World,
    next_history,
    partitions_in_sync,
    plan_deletion,
    plan_expansion,
)

__all__ = ["expanding", "listed_in_flight", "register"]

PLURAL = "orderedtopicexpansions"
IN_FLIGHT = {
    ExpansionPhase.CREATING,
    ExpansionPhase.FENCING,
    ExpansionPhase.EXPANDING,
    ExpansionPhase.PUBLISHING,
}
_IN_FLIGHT_VALUES = {p.value for p in IN_FLIGHT}  # as the index holds them
_FENCED = IN_FLIGHT - {ExpansionPhase.CREATING}
RETRY_SECONDS = 2.0  # the wait after a pass failed (Kafka unavailable, a request timed out) ...
RETRY_MAX_SECONDS = 30.0  # ... doubled at each failure in a row up to this; a pass that succeeds starts over
SKIP_UNDO_ANNOTATION = "ordo.dev/skip-undo"
"""On a deleted expansion: if its fence cannot be undone (its Kafka connection cannot be
resolved), release it anyway; whoever sets it sees to the fence (``ordo abort-fence``)."""
_log = logging.getLogger(__name__)


def retry_delay(failures: int) -> float:
    """The wait after the ``failures``-th failure in a row (1: the first): 2, 4, 8, 16 s, then 30 s,
    backing off as controller-runtime and kopf do, so a cluster that stays away is not asked every
    2 s by every expansion."""
    return min(RETRY_MAX_SECONDS, RETRY_SECONDS * 2.0 ** min(max(failures - 1, 0), 16))


def _state(status: OrderedTopicExpansionStatus) -> ExpansionState:
    return ExpansionState(
        phase=status.phase,
        epoch=status.epoch,
        from_partitions=status.from_partitions,
        to_partitions=status.to_partitions,
        thresholds={int(p): o for p, o in status.thresholds.items()} or None,
        fenced_through_kafka=frozenset(status.fenced_through_kafka),
    )


def _with_step(
    status: OrderedTopicExpansionStatus, step: Step, generation: int | None
) -> OrderedTopicExpansionStatus:
    """``status`` showing ``step``: its state, message and conditions."""
    state = step.state
    shown: dict[str, Any] = {
        "phase": state.phase,
        "epoch": state.epoch,
        "from_partitions": state.from_partitions,
        "to_partitions": state.to_partitions,
        "message": step.message,
        "observed_generation": generation,
        "conditions": _conditions(status.conditions, step, generation),
    }
    if state.thresholds is not None:
        shown["thresholds"] = {str(p): o for p, o in sorted(state.thresholds.items())}
    if state.fenced_through_kafka:
        shown["fenced_through_kafka"] = sorted(state.fenced_through_kafka)
    return status.model_copy(update=shown)


def _conditions(existing: list[Condition], step: Step, generation: int | None) -> list[Condition]:
    phase = step.state.phase
    conditions = set_condition(
        existing, "Ready", phase == ExpansionPhase.COMPLETED, step.reason, step.message, generation
    )
    conditions = set_condition(
        conditions,
        "Progressing",
        phase in IN_FLIGHT or phase == ExpansionPhase.PENDING,
        step.reason,
        step.message,
        generation,
    )
    return set_condition(
        conditions,
        "Failed",
        phase in (ExpansionPhase.FAILED, ExpansionPhase.ABORTED),
        step.reason,
        step.message,
        generation,
    )


def _world(
    side: KafkaSide,
    topic: str,
    settings: OperatorConfig,
    other: str | None,
    started: float | None,
    state: ExpansionState,
    paused: bool = False,
) -> World:
    producers = {pid: _view(r, topic) for pid, r in side.live_producers(topic).items()}
    # before the fence too (Creating): a producer silent since may still land records
    fencing = state.phase in (ExpansionPhase.CREATING, ExpansionPhase.FENCING) and state.epoch is not None
    silent = side.registry.silent(topic, state.epoch or 0) if fencing else {}
    return World(
        topic_partitions=side.partition_count(topic),
        history=side.epochs.history(topic),
        producers=producers,
        other_expansion=other,
        max_partitions=settings.max_partitions,
        fencing_seconds=time.time() - started if started else 0.0,
        stragglers=side.stragglers(topic, state.epoch or 0) if fencing else {},
        silent={pid: _view(r, topic) for pid, r in silent.items()},
        paused=paused,
    )


def _view(report: ProducerReport, topic: str) -> ProducerView:
    return ProducerView(
        fenced_epoch=report.fenced.get(topic),
        partitioner=report.partitioner,
        partitions=report.partitions.get(topic),
        transactional_id=report.transactional_id,
    )


def _apply(side: KafkaSide, topic: str, step: Step) -> tuple[ExpansionState, str | None]:
    """Perform the step's effect: the state it leaves, and a note worth an Event (or None)."""
    state = step.state
    if step.effect in (Effect.APPEND_FENCE, Effect.ABORT_EPOCH, Effect.PUBLISH_EPOCH):
        side.write_history(next_history(step.effect, topic, side.epochs.history(topic), state))
    elif step.effect == Effect.FENCE_PRODUCERS:
        side.fence_producers(step.fence)
    elif step.effect == Effect.CREATE_PARTITIONS:
        assert state.to_partitions is not None
        note = side.create_partitions(topic, state.to_partitions, state.from_partitions or 0)
        return replace(state, served=True), note
    return state, None


def _other_in_flight(
    index: kopf.Index[str, tuple[str, str, str, str]], topic: str, me: str, created: str
) -> str | None:
    """Another expansion of the topic that goes first: one in flight, or one pending since earlier."""
    for key, phase, since, _ in index.get(topic, []):
        if key == me:
            continue
        if phase in _IN_FLIGHT_VALUES or (phase == ExpansionPhase.PENDING and (since, key) < (created, me)):
            return key
    return None


def register(settings: OperatorConfig) -> None:
    """Register the handlers with kopf (called once by the operator's entry point)."""

    @kopf.index(API_GROUP, VERSION, PLURAL, id="expansions_by_topic")  # type: ignore[arg-type]
    def expansions_by_topic(
        name: str,
        namespace: str,
        spec: dict[str, Any],
        status: dict[str, Any],
        meta: dict[str, Any],
        **_: Any,
    ) -> dict[str, tuple[str, str, str, str]]:
        phase = status.get("phase") or ExpansionPhase.PENDING
        ended = expansion_ended_at(status)  # a TopicAutoscaler's cooldown counts from here
        return {
            spec.get("topic", ""): (
                f"{namespace}/{name}",
                str(phase),
                meta.get("creationTimestamp", ""),
                ended.isoformat() if ended is not None else "",
            )
        }

    @kopf.timer(  # type: ignore[arg-type]
        API_GROUP, VERSION, PLURAL, id="check_partitions", interval=settings.partitions_check_seconds,
        when=lambda status, **_: (status or {}).get("phase") == ExpansionPhase.COMPLETED.value,
    )  # fmt: skip
    @metrics.count_errors
    def check_partitions(
        name: str,
        namespace: str,
        body: kopf.Body,
        expansions_by_topic: kopf.Index[str, tuple[str, str, str, str]],
        **_: Any,
    ) -> None:
        topic = str((body.get("spec") or {}).get("topic", ""))
        expanding = any(phase in _IN_FLIGHT_VALUES for _, phase, _, _ in expansions_by_topic.get(topic, []))
        _check_partitions(settings, name, namespace, body, expanding)
        follow_completed(settings, body)

    @kopf.daemon(API_GROUP, VERSION, PLURAL, id="drive_expansion", cancellation_timeout=5.0, backoff=5.0)  # type: ignore[arg-type]
    @metrics.count_errors
    def drive_expansion(
        stopped: kopf.DaemonStopped,
        name: str,
        namespace: str,
        body: kopf.Body,
        meta: dict[str, Any],
        expansions_by_topic: kopf.Index[str, tuple[str, str, str, str]],
        retry: int,
        **_: Any,
    ) -> None:
        if meta.get("deletionTimestamp"):
            return  # being deleted: undo_on_delete decides what is left to do
        driver = _ExpansionDriver.start(settings, namespace, name, body, meta, retry)
        if driver is not None:
            driver.run(stopped, expansions_by_topic)

    @kopf.on.delete(API_GROUP, VERSION, PLURAL, id="undo_on_delete")  # type: ignore[arg-type]
    @metrics.count_errors
    def undo_on_delete(name: str, namespace: str, body: kopf.Body, retry: int, **_: Any) -> None:
        _undo(settings, namespace, name, body, retry)  # raises kopf.TemporaryError to be retried
        metrics.forget_expansion(namespace, name)


_driving: dict[str, int] = {}  # topic -> expansions of it being driven now
_driving_lock = threading.Lock()


def expanding(topic: str) -> bool:
    """Whether an expansion of ``topic`` is being driven (its partitions may exist before its epoch)."""
    with _driving_lock:
        return _driving.get(topic, 0) > 0


def listed_in_flight(index: kopf.Index[str, tuple[str, str, str, str]] | None, topic: str) -> bool:
    """Whether kopf's index of expansions has one of ``topic`` in flight by its status (Creating to
    Publishing; also while it is being deleted, until its undo releases it). Read from another
    thread than kopf's, which may change it meanwhile: a read that fails counts as in flight."""
    if index is None:
        return False
    for _ in range(3):
        try:
            return any(phase in _IN_FLIGHT_VALUES for _, phase, _, _ in list(index.get(topic, [])))
        except RuntimeError:  # changed during the read
            continue
    return True


def _wait_for_report(registry: ProducerLiveness, seen: int, seconds: float) -> None:
    """Until the registry accepted a report after its version ``seen``, or ``seconds``."""
    registry.wait_for(lambda: registry.version != seen, seconds)


@dataclass(frozen=True)
class _Wait:
    seconds: float
    on_registry: bool = False
    """Fencing: a producer's report ends the wait early."""


class _Guard:
    """One expansion's passes and its deletion exclude each other: once the delete handler has
    undone the expansion, no pass of a daemon still running may fence again."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deleted = False


_guards: dict[str, _Guard] = {}
_guards_lock = threading.Lock()


def _guard(key: str) -> _Guard:
    with _guards_lock:
        return _guards.setdefault(key, _Guard())


class _ExpansionDriver:
    """The daemon's memory between passes; each ``step`` reads the world, asks the planner, records
    the step in status and only then applies it."""

    def __init__(
        self,
        settings: OperatorConfig,
        namespace: str,
        name: str,
        body: kopf.Body,
        meta: dict[str, Any],
        resource: OrderedTopicExpansion,
        side: KafkaSide,
    ) -> None:
        self.settings, self.namespace, self.name, self.body = settings, namespace, name, body
        self.resource, self.spec, self.side = resource, resource.spec, side
        self.me, self.created = f"{namespace}/{name}", meta.get("creationTimestamp", "")
        self.guard = _guard(self.me)
        self.status = resource.status or OrderedTopicExpansionStatus()
        self.state = _state(self.status)
        self.started = _seconds(self.status.started_at)
        # an expansion begun by an operator that fenced first has startedAt only: that was the fence
        self.fenced = _seconds(self.status.fenced_at) or (
            self.started if self.state.phase in _FENCED else None
        )
        self.last_reason: str | None = None
        self.begun = time.time()
        self.timer = metrics.ExpansionTimer(namespace, name)
        self.failures = 0  # failed passes in a row: the wait after the next grows with them

    @classmethod
    def start(
        cls,
        settings: OperatorConfig,
        namespace: str,
        name: str,
        body: kopf.Body,
        meta: dict[str, Any],
        retry: int = 0,
    ) -> _ExpansionDriver | None:
        """A driver, or None when there is nothing to drive (ended, or refused with a status).
        ``retry``: kopf's count of this daemon's earlier tries (kopf.TemporaryError)."""
        try:
            resource = OrderedTopicExpansion.model_validate(dict(body))
        except ValidationError as error:  # what the CRD schema cannot check, e.g. credentials in config
            message = f"{first_error(error)}; nothing was changed"
            failed = OrderedTopicExpansionStatus(phase=ExpansionPhase.FAILED, message=message)
            patch_status(PLURAL, namespace, name, failed)
            kopf.event(body, type="Warning", reason="InvalidSpec", message=message)
            metrics.record_expansion_phase(namespace, name, ExpansionPhase.FAILED.value, time.time())
            return None
        status = resource.status or OrderedTopicExpansionStatus()
        if status.phase in (ExpansionPhase.COMPLETED, ExpansionPhase.ABORTED, ExpansionPhase.FAILED):
            metrics.record_expansion_phase(namespace, name, status.phase.value, _ended_at(status))
            return None
        try:
            # one in flight goes on with the clients that drove it if its connection went away; a
            # new one must resolve its own (a missing Secret is bad input, not other credentials)
            if status.phase in _FENCED:
                side = _side(settings, resource, namespace)
            else:
                side = clients_for(kafka_config(resource.spec.kafka, namespace, settings), settings)
        except KafkaConnectionError as error:
            if status.phase in _FENCED:
                # its fence is in the epoch log: failing now would leave the topic fenced with no
                # expansion driving it (until the orphan-fence sweep); wait for the connection
                topic, delay = resource.spec.topic, retry_delay(retry + 1)
                message = (
                    f"the Kafka connection cannot be resolved ({error}); epoch {status.epoch} of "
                    f"{topic!r} stays fencing (its producers wait) until it can: restore what is "
                    f"missing (next try in {delay:g} s), or delete the expansion (its finalizer "
                    f"undoes the fence; ordo abort-fence --topic {topic} --epoch {status.epoch} does it "
                    "by hand)"
                )
                if retry == 0:  # once per outage: the tries that follow say it in the log
                    kopf.event(body, type="Warning", reason="ConnectionUnresolved", message=message)
                _log.warning("%s/%s: %s", namespace, name, message)
                raise kopf.TemporaryError(message, delay=delay) from error
            step = Step(ExpansionState(ExpansionPhase.FAILED), None, "InvalidKafkaConnection", str(error))
            _record(body, namespace, name, status, None, step, resource)
            metrics.ExpansionTimer(namespace, name).finish(step.state.phase.value)
            return None
        return cls(settings, namespace, name, body, meta, resource, side)

    def run(self, stopped: kopf.DaemonStopped, index: kopf.Index[str, tuple[str, str, str, str]]) -> None:
        """Pass after pass until the expansion ends, is deleted or the daemon is stopped."""
        topic = self.spec.topic
        with _driving_lock:
            _driving[topic] = _driving.get(topic, 0) + 1
        try:
            registry = self.side.registry
            while not stopped:
                # taken before the pass reads the registry: a report that arrives during the pass
                # (the last acknowledgement) ends the wait after it at once, not after its seconds
                seen = registry.version
                wait = self.step(index)
                if wait is None:
                    return
                if wait.on_registry:
                    _wait_for_report(registry, seen, wait.seconds)
                else:
                    stopped.wait(wait.seconds)
        finally:
            with _driving_lock:
                _driving[topic] -= 1

    def step(self, index: kopf.Index[str, tuple[str, str, str, str]]) -> _Wait | None:
        """One pass; how long to wait before the next, or None when the expansion ended (or was
        deleted meanwhile)."""
        with self.guard.lock:
            if self.guard.deleted:
                return None
            failures = self.failures
            wait = self._step(index)
            if self.failures == failures:  # no failure (_retry counts them): the next one waits 2 s again
                self.failures = 0
            elif wait is not None:
                wait = _Wait(retry_delay(self.failures))
            return wait

    def _step(self, index: kopf.Index[str, tuple[str, str, str, str]]) -> _Wait | None:
        spec, status = self.spec, self.status
        other = _other_in_flight(index, spec.topic, self.me, self.created)
        try:
            paused = reconciliation_paused(self.body.get("metadata") or {})
            world = _world(self.side, spec.topic, self.settings, other, self.fenced, self.state, paused)
        except Exception as error:  # Kafka unreachable, a metadata request timed out, ...
            self._retry("reading Kafka", error)
            return _Wait(RETRY_SECONDS)
        timeout, grace = spec.fence_timeout_seconds, spec.fence_grace_seconds
        step = plan_expansion(spec.topic, spec.partitions, timeout, self.state, world, grace)
        self.timer.enter(step.state.phase.value)
        now = time.time()
        if step.state.phase != ExpansionPhase.PENDING and self.started is None:
            self.started = now
            status.started_at = datetime.fromtimestamp(now, UTC)
        if step.state.phase == ExpansionPhase.FENCING and self.fenced is None:
            self.fenced = now
            status.fenced_at = datetime.fromtimestamp(now, UTC)
        fenced = step.state.phase in (ExpansionPhase.EXPANDING, ExpansionPhase.PUBLISHING)
        if fenced and self.state.phase == ExpansionPhase.FENCING:  # every producer fenced
            status.fence_wait_seconds = round(now - (self.fenced or now), 3)
            metrics.record_fence(len(world.producers), status.fence_wait_seconds)
        if step.terminal:
            status.duration_seconds = round(now - (self.started or self.begun), 3)
            if self.fenced is not None:
                status.paused_seconds = round(now - self.fenced, 3)
        if (step.state, step.reason) != (self.state, self.last_reason) or step.terminal:
            if step.record:
                self._record(step)  # recorded before the effect
            elif step.reason != self.last_reason:  # the Event alone: queued, no API call waited for
                kopf.event(self.body, type="Normal", reason=step.reason, message=step.message)
            self.last_reason = step.reason
        crash_point(f"before:{step.effect}")
        if step.effect == Effect.PUBLISH_EPOCH and step.state.thresholds is None:
            try:
                step = replace(step, state=self._thresholds(step.state))
            except Exception as error:  # Kafka unavailable, a leader gone: the next pass reads again
                self.state = step.state
                self._retry("read-thresholds", error)
                return _Wait(RETRY_SECONDS)
        try:
            state, note = _apply(self.side, spec.topic, step)
        except Exception as error:  # the step was recorded: the next pass plans it again
            self.state = step.state
            self._retry(str(step.effect), error)
            return _Wait(RETRY_SECONDS)
        self.state = state
        if note is not None:
            kopf.event(self.body, type="Normal", reason="TookEffect", message=note)
        if step.effect == Effect.CREATE_PARTITIONS:  # Strimzi's KafkaTopic raised once they exist
            self.status = follow_created(self.body, self.resource, self.status, self.side)
        crash_point(f"after:{step.effect}")
        if step.terminal:
            self.timer.finish(step.state.phase.value)
            return None
        if step.requeue is None:
            return _Wait(0.0)
        return _Wait(step.requeue, on_registry=step.state.phase == ExpansionPhase.FENCING)

    def _thresholds(self, state: ExpansionState) -> ExpansionState:
        """``state`` with every old partition's end offset now: valid thresholds, since every
        producer is fenced (plans/expansion.py); not recorded before the publish, which holds them."""
        assert state.from_partitions is not None
        crash_point("before:read-thresholds")
        state = replace(state, thresholds=self.side.end_offsets(self.spec.topic, state.from_partitions))
        crash_point("after:read-thresholds")
        return state

    def _record(self, step: Step, announce: bool = False) -> None:
        self.status = _record(
            self.body, self.namespace, self.name, self.status, self.last_reason, step, self.resource, announce
        )

    def _retry(self, doing: str, error: Exception) -> None:
        """A failed pass: say so in the Progressing condition and a Warning Event, and count it;
        ``step`` retries the pass (every step is idempotent) after ``retry_delay`` of the count."""
        metrics.record_error(metrics.error_kind(error))
        self.failures += 1
        message = f"{doing} failed: {error}; retrying at growing intervals up to {RETRY_MAX_SECONDS:.0f} s"
        _log.warning(
            "%s/%s: %s (failure %d in a row: next pass in %.0f s)",
            self.namespace, self.name, message, self.failures, retry_delay(self.failures),
        )  # fmt: skip
        if self.status.message != message:  # a new cause is news even while already retrying
            self._record(Step(self.state, None, "Retrying", message), announce=True)
        self.last_reason = "Retrying"


_undo_said: dict[str, str] = {}  # deleted expansion -> the cause its last Warning named


def _undo(settings: OperatorConfig, namespace: str, name: str, body: kopf.Body, retry: int = 0) -> None:
    """The resource is being deleted: abort its epoch if it is still fencing (plan_deletion), then
    let kopf remove ordo's finalizer. Idempotent: an operator killed in the middle does it again.

    Until the fence is undone the finalizer stays: each failure raises ``kopf.TemporaryError``
    after ``retry_delay`` of kopf's ``retry`` count, with a Warning Event per new cause. When the
    connection cannot be resolved (its Secret deleted or rotated), the clients that drove the
    expansion serve if the operator still holds them (``_held_side``); else it waits for the
    Secret, unless the expansion carries ``SKIP_UNDO_ANNOTATION`` or its namespace is being
    deleted (its Secrets are gone for good, and holding the finalizer would keep the namespace
    Terminating): then it is released, and a Warning on the operator's pod says which fence is
    left and how to abort it."""
    key = f"{namespace}/{name}"
    guard = _guard(key)
    with guard.lock:
        guard.deleted = True  # a daemon pass that follows does nothing
        try:
            resource = OrderedTopicExpansion.model_validate(dict(body))
        except ValidationError:
            return  # refused when created: it never fenced anything
        state = _state(resource.status or OrderedTopicExpansionStatus())
        topic = resource.spec.topic
        # Fencing to Publishing: its epoch may be fencing; Aborted: recorded before the abort was
        # written. Before (Pending, Creating) nothing was fenced; Completed: published; Failed:
        # refused before any fence.
        reach = state.epoch is not None and state.phase in _FENCED
        check = reach or (state.epoch is not None and state.phase == ExpansionPhase.ABORTED)
        step = plan_deletion(topic, state, None)
        try:
            if check:
                step = _undo_on_kafka(settings, resource, namespace, state)
        except KafkaConnectionError as error:
            if reach and _release_unreachable(settings, resource, namespace, state, str(error)):
                _undo_said.pop(key, None)  # released, the fence left (said): the finalizer goes
                metrics.EXPANSION_UNDO_BLOCKED.labels(namespace, name).set(0)
                return
            if reach:
                hint = _restore_hint(resource, state, settings)
                _retry_undo(
                    key, body, f"its Kafka connection cannot be resolved: {error}", error, retry, hint
                )
            # Aborted: its abort was written unless an operator died right before; the orphan-fence
            # sweep aborts such a fence wherever the operator reaches its cluster
        except Exception as error:
            _retry_undo(key, body, f"undoing the deleted expansion failed: {error}", error, retry)
        _undo_said.pop(key, None)
        _log.info("%s/%s: %s", namespace, name, step.message)
        if step.reason != "Deleted":
            kopf.event(body, type="Warning", reason=step.reason, message=step.message)
            metrics.ExpansionTimer().finish(step.state.phase.value)
    with _guards_lock:
        _guards.pop(key, None)


def _undo_on_kafka(
    settings: OperatorConfig, resource: OrderedTopicExpansion, namespace: str, state: ExpansionState
) -> Step:
    """Read the epoch log and abort the expansion's epoch if it is still fencing."""
    topic = resource.spec.topic
    side = _side(settings, resource, namespace)
    if not side.epochs.catch_up(side.timeout):
        raise TimeoutError(f"the epoch log is not read to its end: {side.epochs.describe()}")
    step = plan_deletion(topic, state, side.epochs.history(topic))
    crash_point("before:abort-on-delete")
    if step.effect is not None:
        side.write_history(next_history(step.effect, topic, side.epochs.history(topic), step.state))
    crash_point("after:abort-on-delete")
    return step


def _side(settings: OperatorConfig, resource: OrderedTopicExpansion, namespace: str) -> KafkaSide:
    """The clients for the expansion's connection; when it cannot be resolved or used now (a Secret
    deleted or rotated), those that reached that cluster before (``_held_side``), else the error."""
    try:
        return clients_for(kafka_config(resource.spec.kafka, namespace, settings), settings)
    except Exception as error:
        held = _held_side(resource, settings)
        if held is None:
            raise
        name, bootstrap = resource.metadata.get("name"), _bootstrap(resource, settings)
        _log.info("%s/%s: %s; the clients held for %s serve", namespace, name, error, bootstrap)
        return held


def _bootstrap(resource: OrderedTopicExpansion, settings: OperatorConfig) -> str:
    kafka = resource.spec.kafka
    return kafka.bootstrap_servers if kafka is not None else settings.kafka_bootstrap or ""


def _held_side(resource: OrderedTopicExpansion, settings: OperatorConfig) -> KafkaSide | None:
    """Clients the operator holds for the expansion's cluster (its bootstrap servers, which the
    spec names without a Secret): those that drove it, unless this process never reached it."""
    bootstrap = _bootstrap(resource, settings)
    return next((s for s in known_sides() if s.config.get("bootstrap.servers") == bootstrap), None)


def _restore_hint(resource: OrderedTopicExpansion, state: ExpansionState, settings: OperatorConfig) -> str:
    """What a person can do about a fence the operator cannot reach."""
    name, topic = resource.metadata.get("name"), resource.spec.topic
    return (
        f"epoch {state.epoch} of {topic!r} stays fencing (its producers wait) and the finalizer stays "
        f"until it is undone: restore what is missing (the operator retries), or abort the fence "
        f"yourself (ordo abort-fence --topic {topic} --epoch {state.epoch} --bootstrap "
        f"{_bootstrap(resource, settings)} --epoch-topic {settings.epoch_topic}, with the connection's "
        f"-X/--command-config) and release the expansion: kubectl annotate ote {name} "
        f"{SKIP_UNDO_ANNOTATION}=true"
    )


def _release_unreachable(
    settings: OperatorConfig, resource: OrderedTopicExpansion, namespace: str, state: ExpansionState, why: str
) -> bool:
    """Whether to release a deleted expansion whose fence cannot be reached: annotated so, or its
    namespace is being deleted (its Secrets went first, and cannot come back). Said on the
    operator's pod (the namespace may take no Event) and in the log."""
    name, topic = resource.metadata.get("name"), resource.spec.topic
    annotated = (resource.metadata.get("annotations") or {}).get(SKIP_UNDO_ANNOTATION) == "true"
    if annotated:
        because = f"it carries {SKIP_UNDO_ANNOTATION}=true"
    elif namespace_terminating(namespace):
        because = f"its namespace {namespace!r} is being deleted (with its Secrets)"
    else:
        return False
    message = (
        f"{namespace}/{name} released although its fence could not be undone ({why}), since {because}: "
        f"epoch {state.epoch} of {topic!r} on {_bootstrap(resource, settings)} stays fencing and its "
        f"producers wait until it is aborted: ordo abort-fence --topic {topic} --epoch {state.epoch} "
        f"--bootstrap {_bootstrap(resource, settings)} --epoch-topic {settings.epoch_topic} (with the "
        "connection's -X/--command-config); the operator aborts it itself if it reaches that cluster "
        f"and no expansion of {topic!r} is in flight for ORDO_ORPHAN_FENCE_SECONDS"
    )
    _log.error("%s", message)
    post_operator_event("FenceLeftFencing", message, "Warning")
    if annotated:
        kopf.event(resource_body(resource), type="Warning", reason="FenceLeftFencing", message=message)
    return True


def resource_body(resource: OrderedTopicExpansion) -> kopf.Body:
    """What kopf.event needs of a resource: its kind, name, namespace and uid."""
    return cast(kopf.Body, resource.model_dump(by_alias=True, exclude_none=True, mode="json"))


def _retry_undo(
    key: str, body: kopf.Body, cause: str, error: Exception, retry: int, hint: str = ""
) -> NoReturn:
    """Keep the finalizer and retry after ``retry_delay``; a Warning Event when the cause is new."""
    metrics.record_error(metrics.error_kind(error))
    delay = retry_delay(retry + 1)
    namespace, name = key.split("/", 1)
    metrics.EXPANSION_UNDO_BLOCKED.labels(namespace, name).set(1 if hint else 0)
    then = hint or "the finalizer stays until it is undone"
    message = f"{cause}; {then}; retrying at growing intervals up to {RETRY_MAX_SECONDS:.0f} s"
    _log.warning("%s: %s (next try in %.0f s)", key, message, delay)
    if _undo_said.get(key) != cause:
        _undo_said[key] = cause
        kopf.event(body, type="Warning", reason="UndoBlocked" if hint else "Retrying", message=message)
    raise kopf.TemporaryError(message, delay=delay) from error


def _check_partitions(
    settings: OperatorConfig, name: str, namespace: str, body: kopf.Body, expanding: bool
) -> None:
    """A completed expansion that made the topic's current epoch checks the topic still has only
    the partitions the epoch knows; partitions added outside ordo turn PartitionsInSync False,
    with a Warning Event (gated consumers hold their records until an epoch covers them)."""
    resource = OrderedTopicExpansion.model_validate(dict(body))
    status = resource.status or OrderedTopicExpansionStatus()
    topic = resource.spec.topic
    try:
        side = clients_for(kafka_config(resource.spec.kafka, namespace, settings), settings)
        judged = partitions_in_sync(
            topic, status.epoch, side.partition_count(topic), side.epochs.history(topic), expanding
        )
    except Exception as error:  # Kafka unreachable now: the next check tries again
        _log.warning("%s/%s: partitions of %s not checked: %s", namespace, name, topic, error)
        return
    if judged is None:
        return
    conditions = status.conditions
    before = next((c for c in conditions if c.type == "PartitionsInSync"), None)
    if before is not None and (before.status == "True") == judged.status and before.message == judged.message:
        return
    generation = resource.metadata.get("generation")
    conditions = set_condition(
        conditions, "PartitionsInSync", judged.status, judged.reason, judged.message, generation
    )
    patch_status(PLURAL, namespace, name, OrderedTopicExpansionStatus(conditions=conditions))
    if not judged.status:
        _log.warning("%s/%s: %s", namespace, name, judged.message)
        kopf.event(body, type="Warning", reason=judged.reason, message=judged.message)


def _record(
    body: kopf.Body,
    namespace: str,
    name: str,
    status: OrderedTopicExpansionStatus,
    reason: str | None,
    step: Step,
    resource: OrderedTopicExpansion,
    announce: bool = False,
) -> OrderedTopicExpansionStatus:
    """Patch status from ``step`` and return it as written; an Event when the phase or the reason
    (``reason``: the last step's) changes, or ``announce``."""
    previous = (status.phase, reason)
    status = _with_step(status, step, resource.metadata.get("generation"))
    patch_status(PLURAL, namespace, name, status)
    if announce or previous != (status.phase, step.reason):
        failed = step.state.phase in (ExpansionPhase.FAILED, ExpansionPhase.ABORTED)
        event_type = "Warning" if failed or step.reason == "Retrying" else "Normal"
        kopf.event(body, type=event_type, reason=step.reason, message=step.message)
    return status


def _ended_at(status: OrderedTopicExpansionStatus) -> float:
    """When an ended expansion ended (Unix time): its start and duration, else now."""
    started, took = _seconds(status.started_at), status.duration_seconds
    return started + took if started is not None and took is not None else time.time()


def _seconds(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None
