"""kopf handlers for OrderedTopicExpansion: a daemon per expansion drives the pure state machine.

Each pass reads the world, asks ``plan_expansion`` for the next step, records the step in status,
and only then performs its effect, so a killed operator resumes from status and the world.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from ordo.api import (
    API_GROUP,
    Condition,
    ExpansionPhase,
    OrderedTopicExpansion,
    OrderedTopicExpansionStatus,
)
from ordo.api.common import VERSION, set_condition

from . import metrics
from .config import OperatorConfig
from .crash import crash_point
from .kafka import KafkaSide, clients_for
from .kube import KafkaConnectionError, kafka_config, patch_status
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

__all__ = ["expanding", "register"]

PLURAL = "orderedtopicexpansions"
IN_FLIGHT = {
    ExpansionPhase.CREATING,
    ExpansionPhase.FENCING,
    ExpansionPhase.EXPANDING,
    ExpansionPhase.PUBLISHING,
}
_IN_FLIGHT_VALUES = {p.value for p in IN_FLIGHT}  # as the index holds them
_FENCED = IN_FLIGHT - {ExpansionPhase.CREATING}
RETRY_SECONDS = 2.0  # after a pass failed (Kafka unavailable, a request timed out)
_log = logging.getLogger(__name__)


def _state(status: OrderedTopicExpansionStatus) -> ExpansionState:
    return ExpansionState(
        phase=status.phase,
        epoch=status.epoch,
        from_partitions=status.from_partitions,
        to_partitions=status.to_partitions,
        thresholds={int(p): o for p, o in status.thresholds.items()} or None,
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
) -> World:
    producers = {
        pid: ProducerView(
            fenced_epoch=r.fenced.get(topic), partitioner=r.partitioner, partitions=r.partitions.get(topic)
        )
        for pid, r in side.live_producers(topic).items()
    }
    # before the fence too (Creating): a producer silent since may still land records
    fencing = state.phase in (ExpansionPhase.CREATING, ExpansionPhase.FENCING) and state.epoch is not None
    return World(
        topic_partitions=side.partition_count(topic),
        history=side.epochs.history(topic),
        producers=producers,
        other_expansion=other,
        max_partitions=settings.max_partitions,
        fencing_seconds=time.time() - started if started else 0.0,
        stragglers=side.stragglers(topic, state.epoch or 0) if fencing else {},
    )


def _apply(side: KafkaSide, topic: str, step: Step) -> tuple[ExpansionState, str | None]:
    """Perform the step's effect: the state it leaves, and a note worth an Event (or None)."""
    state = step.state
    if step.effect in (Effect.APPEND_FENCE, Effect.ABORT_EPOCH, Effect.PUBLISH_EPOCH):
        side.write_history(next_history(step.effect, topic, side.epochs.history(topic), state))
    elif step.effect == Effect.READ_THRESHOLDS:
        assert state.from_partitions is not None
        thresholds = side.end_offsets(topic, state.from_partitions)
        read = ExpansionState(
            state.phase, state.epoch, state.from_partitions, state.to_partitions, thresholds, state.direct
        )
        return read, None
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
        return {
            spec.get("topic", ""): (f"{namespace}/{name}", str(phase), meta.get("creationTimestamp", ""), "")
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

    @kopf.daemon(API_GROUP, VERSION, PLURAL, id="drive_expansion", cancellation_timeout=5.0, backoff=5.0)  # type: ignore[arg-type]
    @metrics.count_errors
    def drive_expansion(
        stopped: kopf.DaemonStopped,
        name: str,
        namespace: str,
        body: kopf.Body,
        meta: dict[str, Any],
        expansions_by_topic: kopf.Index[str, tuple[str, str, str, str]],
        **_: Any,
    ) -> None:
        if meta.get("deletionTimestamp"):
            return  # being deleted: undo_on_delete decides what is left to do
        driver = _ExpansionDriver.start(settings, namespace, name, body, meta)
        if driver is not None:
            driver.run(stopped, expansions_by_topic)

    @kopf.on.delete(API_GROUP, VERSION, PLURAL, id="undo_on_delete")  # type: ignore[arg-type]
    @metrics.count_errors
    def undo_on_delete(name: str, namespace: str, body: kopf.Body, **_: Any) -> None:
        _undo(settings, namespace, name, body)
        metrics.forget_expansion(namespace, name)


_driving: dict[str, int] = {}  # topic -> expansions of it being driven now
_driving_lock = threading.Lock()


def expanding(topic: str) -> bool:
    """Whether an expansion of ``topic`` is being driven (its partitions may exist before its epoch)."""
    with _driving_lock:
        return _driving.get(topic, 0) > 0


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

    @classmethod
    def start(
        cls, settings: OperatorConfig, namespace: str, name: str, body: kopf.Body, meta: dict[str, Any]
    ) -> _ExpansionDriver | None:
        """A driver, or None when there is nothing to drive (ended, or refused with a status)."""
        try:
            resource = OrderedTopicExpansion.model_validate(dict(body))
        except ValidationError as error:  # what the CRD schema cannot check, e.g. credentials in config
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            message = f"{where}: {first['msg']}; nothing was changed"
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
            side = clients_for(kafka_config(resource.spec.kafka, namespace, settings), settings)
        except KafkaConnectionError as error:
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
            while not stopped:
                wait = self.step(index)
                if wait is None:
                    return
                if wait.on_registry:
                    self.side.registry.wait_for_change(wait.seconds)  # an acknowledgement wakes us at once
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
            return self._step(index)

    def _step(self, index: kopf.Index[str, tuple[str, str, str, str]]) -> _Wait | None:
        spec, status = self.spec, self.status
        other = _other_in_flight(index, spec.topic, self.me, self.created)
        try:
            world = _world(self.side, spec.topic, self.settings, other, self.fenced, self.state)
        except Exception as error:  # Kafka unreachable, a metadata request timed out, ...
            self._retry("reading Kafka", error)
            return _Wait(RETRY_SECONDS)
        step = plan_expansion(spec.topic, spec.partitions, spec.fence_timeout_seconds, self.state, world)
        self.timer.enter(step.state.phase.value)
        now = time.time()
        if step.state.phase != ExpansionPhase.PENDING and self.started is None:
            self.started = now
            status.started_at = datetime.fromtimestamp(now, UTC)
        if step.state.phase == ExpansionPhase.FENCING and self.fenced is None:
            self.fenced = now
            status.fenced_at = datetime.fromtimestamp(now, UTC)
        if step.state.phase == ExpansionPhase.EXPANDING and self.state.phase == ExpansionPhase.FENCING:
            status.fence_wait_seconds = round(now - (self.fenced or now), 3)
            metrics.record_fence(len(world.producers), status.fence_wait_seconds)
        if step.terminal:
            status.duration_seconds = round(now - (self.started or self.begun), 3)
            if self.fenced is not None:
                status.paused_seconds = round(now - self.fenced, 3)
        if (step.state, step.reason) != (self.state, self.last_reason) or step.terminal:
            self._record(step)  # recorded before the effect
            self.last_reason = step.reason
        crash_point(f"before:{step.effect}")
        try:
            state, note = _apply(self.side, spec.topic, step)
        except Exception as error:  # the step was recorded: the next pass plans it again
            self.state = step.state
            self._retry(str(step.effect), error)
            return _Wait(RETRY_SECONDS)
        self.state = state
        if note is not None:
            kopf.event(self.body, type="Normal", reason="TookEffect", message=note)
        crash_point(f"after:{step.effect}")
        if state.thresholds != step.state.thresholds:  # the thresholds read are recorded at once
            self._record(Step(state, None, step.reason, step.message))
        if step.terminal:
            self.timer.finish(step.state.phase.value)
            return None
        if step.requeue is None:
            return _Wait(0.0)
        return _Wait(step.requeue, on_registry=step.state.phase == ExpansionPhase.FENCING)

    def _record(self, step: Step, announce: bool = False) -> None:
        self.status = _record(
            self.body, self.namespace, self.name, self.status, self.last_reason, step, self.resource, announce
        )

    def _retry(self, doing: str, error: Exception) -> None:
        """A failed pass: say so in the Progressing condition and a Warning Event; the caller
        retries the pass (every step is idempotent)."""
        metrics.record_error(metrics.error_kind(error))
        message = f"{doing} failed: {error}; retrying every {RETRY_SECONDS:.0f} s"
        _log.warning("%s/%s: %s", self.namespace, self.name, message)
        if self.status.message != message:  # a new cause is news even while already retrying
            self._record(Step(self.state, None, "Retrying", message), announce=True)
        self.last_reason = "Retrying"


def _undo(settings: OperatorConfig, namespace: str, name: str, body: kopf.Body) -> None:
    """The resource is being deleted: abort its epoch if it is still fencing (plan_deletion), then
    let kopf remove ordo's finalizer. Idempotent: an operator killed in the middle does it again."""
    guard = _guard(f"{namespace}/{name}")
    with guard.lock:
        guard.deleted = True  # a daemon pass that follows does nothing
        try:
            resource = OrderedTopicExpansion.model_validate(dict(body))
        except ValidationError:
            return  # refused when created: it never fenced anything
        state = _state(resource.status or OrderedTopicExpansionStatus())
        topic = resource.spec.topic
        try:
            side = clients_for(kafka_config(resource.spec.kafka, namespace, settings), settings)
        except KafkaConnectionError:
            return  # it could never reach Kafka: nothing was written
        try:
            if not side.epochs.catch_up(side.timeout):
                raise TimeoutError(f"the epoch log is not read to its end: {side.epochs.describe()}")
            step = plan_deletion(topic, state, side.epochs.history(topic))
            crash_point("before:abort-on-delete")
            if step.effect is not None:
                side.write_history(next_history(step.effect, topic, side.epochs.history(topic), step.state))
            crash_point("after:abort-on-delete")
        except Exception as error:
            metrics.record_error(metrics.error_kind(error))
            message = f"undoing the deleted expansion failed: {error}; retrying every {RETRY_SECONDS:.0f} s"
            kopf.event(body, type="Warning", reason="Retrying", message=message)
            raise kopf.TemporaryError(message, delay=RETRY_SECONDS) from error
        _log.info("%s/%s: %s", namespace, name, step.message)
        if step.reason != "Deleted":
            kopf.event(body, type="Warning", reason=step.reason, message=step.message)
            metrics.ExpansionTimer().finish(step.state.phase.value)
    with _guards_lock:
        _guards.pop(f"{namespace}/{name}", None)


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
