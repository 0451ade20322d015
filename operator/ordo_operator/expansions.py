"""kopf handlers for OrderedTopicExpansion: a daemon per expansion drives the pure state machine.

Each pass reads the world, asks ``plan_expansion`` for the next step, records the step in status,
and only then performs its effect, so a killed operator resumes from status and the world.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from ordo.api import API_GROUP, Condition, ExpansionPhase, OrderedTopicExpansion
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
    plan_expansion,
)

__all__ = ["register"]

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


def _state(status: dict[str, Any]) -> ExpansionState:
    thresholds = status.get("thresholds") or None
    return ExpansionState(
        phase=ExpansionPhase(status.get("phase") or ExpansionPhase.PENDING),
        epoch=status.get("epoch"),
        from_partitions=status.get("fromPartitions"),
        to_partitions=status.get("toPartitions"),
        thresholds={int(p): int(o) for p, o in thresholds.items()} if thresholds else None,
    )


def _status_of(state: ExpansionState) -> dict[str, Any]:
    status: dict[str, Any] = {
        "phase": state.phase.value,
        "epoch": state.epoch,
        "fromPartitions": state.from_partitions,
        "toPartitions": state.to_partitions,
    }
    if state.thresholds is not None:
        status["thresholds"] = {str(p): o for p, o in sorted(state.thresholds.items())}
    return status


def _conditions(existing: list[Any], step: Step, generation: int | None) -> list[dict[str, Any]]:
    conditions = [Condition.model_validate(c) for c in existing]
    phase = step.state.phase
    conditions = set_condition(
        conditions, "Ready", phase == ExpansionPhase.COMPLETED, step.reason, step.message, generation
    )
    conditions = set_condition(
        conditions,
        "Progressing",
        phase in IN_FLIGHT or phase == ExpansionPhase.PENDING,
        step.reason,
        step.message,
        generation,
    )
    conditions = set_condition(
        conditions,
        "Failed",
        phase in (ExpansionPhase.FAILED, ExpansionPhase.ABORTED),
        step.reason,
        step.message,
        generation,
    )
    return [c.model_dump(by_alias=True, mode="json", exclude_none=True) for c in conditions]


def _world(
    side: KafkaSide, topic: str, settings: OperatorConfig, other: str | None, started: float | None
) -> World:
    producers = {
        pid: ProducerView(fenced_epoch=r.fenced.get(topic), partitioner=r.partitioner)
        for pid, r in side.live_producers(topic).items()
    }
    return World(
        topic_partitions=side.partition_count(topic),
        history=side.epochs.history(topic),
        producers=producers,
        other_expansion=other,
        max_partitions=settings.max_partitions,
        fencing_seconds=time.time() - started if started else 0.0,
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
        try:
            resource = OrderedTopicExpansion.model_validate(dict(body))
        except ValidationError as error:  # what the CRD schema cannot check, e.g. credentials in config
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            message = f"{where}: {first['msg']}; nothing was changed"
            patch_status(PLURAL, namespace, name, {"phase": ExpansionPhase.FAILED.value, "message": message})
            kopf.event(body, type="Warning", reason="InvalidSpec", message=message)
            return
        spec, status = resource.spec, dict(body.get("status") or {})
        state = _state(status)
        if state.phase in (ExpansionPhase.COMPLETED, ExpansionPhase.ABORTED, ExpansionPhase.FAILED):
            return
        me, created = f"{namespace}/{name}", meta.get("creationTimestamp", "")
        try:
            side = clients_for(kafka_config(spec.kafka, namespace, settings), settings)
        except KafkaConnectionError as error:
            step = Step(ExpansionState(ExpansionPhase.FAILED), None, "InvalidKafkaConnection", str(error))
            _record(body, namespace, name, status, step, resource)
            metrics.ExpansionTimer().finish(step.state.phase.value)
            return
        started: float | None = _parse_time(status.get("startedAt"))
        # an expansion begun by an operator that fenced first has startedAt only: that was the fence
        fenced = _parse_time(status.get("fencedAt")) or (started if state.phase in _FENCED else None)
        last_reason = status.get("reason")
        begun = time.time()
        timer = metrics.ExpansionTimer()
        while not stopped:
            other = _other_in_flight(expansions_by_topic, spec.topic, me, created)
            try:
                world = _world(side, spec.topic, settings, other, fenced)
            except Exception as error:  # Kafka unreachable, a metadata request timed out, ...
                last_reason = _retry(body, namespace, name, status, state, resource, "reading Kafka", error)
                stopped.wait(RETRY_SECONDS)
                continue
            step = plan_expansion(spec.topic, spec.partitions, spec.fence_timeout_seconds, state, world)
            timer.enter(step.state.phase.value)
            now = time.time()
            if step.state.phase != ExpansionPhase.PENDING and started is None:
                started = now
                status["startedAt"] = _format_time(started)
            if step.state.phase == ExpansionPhase.FENCING and fenced is None:
                fenced = now
                status["fencedAt"] = _format_time(fenced)
            if step.state.phase == ExpansionPhase.EXPANDING and state.phase == ExpansionPhase.FENCING:
                status["fenceWaitSeconds"] = round(now - (fenced or now), 3)
                metrics.record_fence(len(world.producers), status["fenceWaitSeconds"])
            if step.terminal:
                status["durationSeconds"] = round(now - (started or begun), 3)
                if fenced is not None:
                    status["pausedSeconds"] = round(now - fenced, 3)
            if (step.state, step.reason) != (state, last_reason) or step.terminal:
                _record(body, namespace, name, status, step, resource)  # recorded before the effect
                last_reason = step.reason
            crash_point(f"before:{step.effect}")
            try:
                state, note = _apply(side, spec.topic, step)
            except Exception as error:  # the step was recorded: the next pass plans it again
                state = step.state
                last_reason = _retry(body, namespace, name, status, state, resource, str(step.effect), error)
                stopped.wait(RETRY_SECONDS)
                continue
            if note is not None:
                kopf.event(body, type="Normal", reason="TookEffect", message=note)
            crash_point(f"after:{step.effect}")
            if state.thresholds != step.state.thresholds:  # the thresholds read are recorded at once
                _record(body, namespace, name, status, Step(state, None, step.reason, step.message), resource)
            if step.terminal:
                timer.finish(step.state.phase.value)
                return
            if step.requeue and step.state.phase == ExpansionPhase.FENCING:
                side.registry.wait_for_change(step.requeue)  # an acknowledgement wakes us at once
            elif step.requeue:
                stopped.wait(step.requeue)


def _check_partitions(
    settings: OperatorConfig, name: str, namespace: str, body: kopf.Body, expanding: bool
) -> None:
    """A completed expansion that made the topic's current epoch checks the topic still has only
    the partitions the epoch knows; partitions added outside ordo turn PartitionsInSync False,
    with a Warning Event (gated consumers hold their records until an epoch covers them)."""
    resource = OrderedTopicExpansion.model_validate(dict(body))
    status = dict(body.get("status") or {})
    topic = resource.spec.topic
    try:
        side = clients_for(kafka_config(resource.spec.kafka, namespace, settings), settings)
        judged = partitions_in_sync(
            topic, status.get("epoch"), side.partition_count(topic), side.epochs.history(topic), expanding
        )
    except Exception as error:  # Kafka unreachable now: the next check tries again
        _log.warning("%s/%s: partitions of %s not checked: %s", namespace, name, topic, error)
        return
    if judged is None:
        return
    conditions = [Condition.model_validate(c) for c in status.get("conditions") or []]
    before = next((c for c in conditions if c.type == "PartitionsInSync"), None)
    if before is not None and (before.status == "True") == judged.status and before.message == judged.message:
        return
    generation = resource.metadata.get("generation")
    conditions = set_condition(
        conditions, "PartitionsInSync", judged.status, judged.reason, judged.message, generation
    )
    patch_status(
        PLURAL, namespace, name,
        {"conditions": [c.model_dump(by_alias=True, mode="json", exclude_none=True) for c in conditions]},
    )  # fmt: skip
    if not judged.status:
        _log.warning("%s/%s: %s", namespace, name, judged.message)
        kopf.event(body, type="Warning", reason=judged.reason, message=judged.message)


def _record(
    body: kopf.Body,
    namespace: str,
    name: str,
    status: dict[str, Any],
    step: Step,
    resource: OrderedTopicExpansion,
    announce: bool = False,
) -> None:
    """Patch status from ``step``; an Event when the phase or reason changes, or ``announce``."""
    previous = (status.get("phase"), status.get("reason"))
    status.update(_status_of(step.state))
    status["reason"] = step.reason
    status["message"] = step.message
    status["observedGeneration"] = resource.metadata.get("generation")
    status["conditions"] = _conditions(
        status.get("conditions") or [], step, resource.metadata.get("generation")
    )
    patch_status(PLURAL, namespace, name, {k: v for k, v in status.items() if k != "reason"})
    if announce or previous != (status["phase"], step.reason):
        failed = step.state.phase in (ExpansionPhase.FAILED, ExpansionPhase.ABORTED)
        event_type = "Warning" if failed or step.reason == "Retrying" else "Normal"
        kopf.event(body, type=event_type, reason=step.reason, message=step.message)
    status["reason"] = step.reason


def _retry(
    body: kopf.Body,
    namespace: str,
    name: str,
    status: dict[str, Any],
    state: ExpansionState,
    resource: OrderedTopicExpansion,
    doing: str,
    error: Exception,
) -> str:
    """A failed pass: say so in the Progressing condition and a Warning Event; the caller retries
    the pass (every step is idempotent). Returns the reason recorded."""
    metrics.record_error(metrics.error_kind(error))
    message = f"{doing} failed: {error}; retrying every {RETRY_SECONDS:.0f} s"
    _log.warning("%s/%s: %s", namespace, name, message)
    if status.get("message") != message:  # a new cause is news even while already retrying
        step = Step(state, None, "Retrying", message)
        _record(body, namespace, name, status, step, resource, announce=True)
    return "Retrying"


def _format_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_time(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
