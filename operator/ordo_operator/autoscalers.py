"""kopf handlers for TopicAutoscaler: a daemon per autoscaler measures its topic's load from Kafka
every ``measureIntervalSeconds`` (``ordo_operator.load``), asks ``plans.autoscale.decide`` what to
do, and creates the OrderedTopicExpansion it decides on, owned by the autoscaler and named after it
and the count (``<autoscaler>-<count>``), so an operator restarted after the create does not create
another. Bad input (a spec the model refuses, a connection that cannot be resolved, a missing
topic, an expansion the API server refuses, a second autoscaler of the topic) is a condition and a
Warning Event; nothing changes. Deleting an autoscaler releases its expansions in flight (they
finish, no longer owned). Every choice is a pure function of ``plans``; this module reads and
applies.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import kopf
from kubernetes.client import CustomObjectsApi
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from ordo.api import API_GROUP, OrderedTopicExpansionSpec, TopicAutoscaler, TopicAutoscalerStatus
from ordo.api.common import PAUSE_ANNOTATION, PAUSED, VERSION, first_error, reconciliation_paused
from ordo.api.topic_autoscaler import ScalingDecision

from . import metrics
from .config import OperatorConfig
from .kafka import KafkaSide, clients_for
from .kube import KafkaConnectionError, api_client, kafka_config, status_patch
from .load import LoadMeter, TopicMissing
from .plans.autoscale import Decision, Load, Outcome, Policy, Situation, decide
from .plans.autoscale_peers import (
    AutoscalerEntry,
    ExpansionEntry,
    last_end,
    resolve_due,
    rival,
    to_release,
)
from .plans.autoscaler_status import ENDED, after_conflict, forget_refusal, measured_load, refused, shown

__all__ = ["PLURAL", "register"]

PLURAL = "topicautoscalers"
EXPANSIONS = "orderedtopicexpansions"
AUTOSCALER_LABEL = "ordo.dev/autoscaler"
STATUS_EVERY_SECONDS = 15.0  # the measured load in status is refreshed this often (or every 5 intervals)
_Index = kopf.Index[str, ExpansionEntry]
_Autoscalers = kopf.Index[str, AutoscalerEntry]
_log = logging.getLogger(__name__)


def register(settings: OperatorConfig) -> None:
    """Register the handlers with kopf (called once by the operator's entry point)."""

    @kopf.index(API_GROUP, VERSION, PLURAL, id="autoscalers_by_topic")  # type: ignore[arg-type]
    def autoscalers_by_topic(
        name: str, namespace: str, spec: dict[str, Any], meta: dict[str, Any], **_: Any
    ) -> dict[str, AutoscalerEntry]:
        return {str(spec.get("topic", "")): _entry(namespace, name, spec, meta)}

    @kopf.daemon(API_GROUP, VERSION, PLURAL, id="drive_autoscaler", cancellation_timeout=5.0, backoff=5.0)  # type: ignore[arg-type]
    @metrics.count_errors
    def drive_autoscaler(
        stopped: kopf.DaemonStopped,
        name: str,
        namespace: str,
        body: kopf.Body,
        expansions_by_topic: _Index,
        autoscalers_by_topic: _Autoscalers,
        **_: Any,
    ) -> None:
        driver = _Driver(settings, namespace, name, body)
        try:
            while not stopped:
                started = time.monotonic()
                interval = driver.step(expansions_by_topic, autoscalers_by_topic)
                stopped.wait(max(0.0, interval - (time.monotonic() - started)))
        finally:
            driver.close()
            metrics.forget_autoscaler(namespace, name)

    @kopf.on.delete(API_GROUP, VERSION, PLURAL, id="release_expansions")  # type: ignore[arg-type]
    @metrics.count_errors
    def release_expansions(
        name: str, namespace: str, meta: dict[str, Any], body: kopf.Body, **_: Any
    ) -> None:
        for expansion in release(namespace, name, str(meta.get("uid", ""))):
            message = f"deleted while {expansion} was in flight: it finishes on its own, no longer owned"
            kopf.info(body, reason="Released", message=message)
            _log.info("%s/%s %s", namespace, name, message)


def release(namespace: str, name: str, uid: str) -> list[str]:
    """A deleted autoscaler leaves its expansions in flight to finish: their ownerReference to it
    goes (the resourceVersion read guards the patch), so the garbage collector, which deletes the
    ended ones, does not abort their fences. The names released."""
    api = CustomObjectsApi(api_client())
    listed = cast(
        dict[str, Any],
        api.list_namespaced_custom_object(
            API_GROUP, VERSION, namespace, EXPANSIONS, label_selector=f"{AUTOSCALER_LABEL}={name}"
        ),
    )
    released = []
    for expansion, version, owners in to_release(listed.get("items", []), uid):
        patch = {"metadata": {"ownerReferences": owners, "resourceVersion": version}}
        api.patch_namespaced_custom_object(API_GROUP, VERSION, namespace, EXPANSIONS, expansion, patch)
        released.append(expansion)
    return released


def _entry(namespace: str, name: str, spec: Mapping[str, Any], meta: Mapping[str, Any]) -> AutoscalerEntry:
    """An autoscaler as the index of them by topic has it: two of one topic and Kafka are rivals."""
    kafka = spec.get("kafka") or {}
    return (
        f"{namespace}/{name}",
        str(meta.get("creationTimestamp", "")),
        str(kafka.get("bootstrapServers", "")),
    )


def in_flight(index: _Index, topic: str) -> str | None:
    """An expansion of ``topic`` that has not ended, by kopf's index of them (any owner)."""
    for key, phase, _, _ in list(index.get(topic, [])):
        if phase not in ENDED:
            return key
    return None


def expansion_body(autoscaler: TopicAutoscaler, name: str, target: int) -> dict[str, Any]:
    """The OrderedTopicExpansion to ``target`` partitions, owned by ``autoscaler``."""
    spec = autoscaler.spec
    wire = OrderedTopicExpansionSpec(
        topic=spec.topic,
        partitions=target,
        fence_timeout_seconds=spec.fence_timeout_seconds,
        kafka=spec.kafka,
        kafka_topic_ref=spec.kafka_topic_ref,  # Strimzi's KafkaTopic follows each expansion
    )
    meta = autoscaler.metadata
    return {
        "apiVersion": f"{API_GROUP}/{VERSION}",
        "kind": "OrderedTopicExpansion",
        "metadata": {
            "name": name,
            "labels": {AUTOSCALER_LABEL: str(meta.get("name", ""))},
            "ownerReferences": [
                {
                    "apiVersion": f"{API_GROUP}/{VERSION}",
                    "kind": "TopicAutoscaler",
                    "name": meta.get("name"),
                    "uid": meta.get("uid"),
                    "controller": True,
                }
            ],
        },
        "spec": wire.model_dump(by_alias=True, exclude_none=True, mode="json"),
    }


def _policy(resource: TopicAutoscaler, settings: OperatorConfig) -> Policy:
    spec, targets = resource.spec, resource.spec.targets
    return Policy(
        min_partitions=spec.min_partitions,
        max_partitions=min(spec.max_partitions, settings.max_partitions),
        window=spec.stabilization_window_seconds,
        cooldown=spec.cooldown_seconds,
        growth=spec.growth,
        records_per_partition=targets.records_per_second_per_partition,
        bytes_per_partition=targets.bytes_per_second_per_partition,
        lag_per_partition={g.name: g.lag_per_partition for g in targets.consumer_groups},
    )


@dataclass
class _Driver:
    """One autoscaler's I/O between measurements: its meter, resolved connection and the samples of
    its window; every choice is made by ``plans.autoscale``, ``plans.autoscaler_status`` and
    ``plans.autoscale_peers``."""

    settings: OperatorConfig
    namespace: str
    name: str
    body: kopf.Body
    meter: LoadMeter | None = None
    measuring: tuple[str, tuple[str, ...], int] | None = None  # topic, groups, id of the side
    resolved: tuple[str, float] | None = None  # the spec's connection resolved, and when
    config: dict[str, Any] = field(default_factory=dict)
    samples: list[Load] = field(default_factory=list)
    status: TopicAutoscalerStatus | None = None
    written: float = 0.0
    said: str | None = None  # the refusal last announced

    def step(self, index: _Index, autoscalers: _Autoscalers) -> float:
        """One measurement and decision; the seconds until the next."""
        if (self.body.get("metadata") or {}).get("deletionTimestamp"):
            return 1.0  # being deleted (kopf's live body): nothing more is created; the daemon stops
        try:
            resource = TopicAutoscaler.model_validate(dict(self.body))
        except ValidationError as error:  # what the CRD schema cannot check
            self._refuse("InvalidSpec", f"{first_error(error)}; nothing was changed")
            return 10.0
        spec = resource.spec
        interval = spec.measure_interval_seconds
        if self.status is None:
            self.status = resource.status or TopicAutoscalerStatus()
        if reconciliation_paused(resource.metadata):
            self.samples = []  # what it measured before the pause decides nothing after it
            self._refuse(
                PAUSED,
                f"the {PAUSE_ANNOTATION} annotation pauses it: it measures and decides nothing until removed",
            )
            return min(interval, 2.0)
        self._clear(PAUSED)
        me = _entry(self.namespace, self.name, dict(self.body.get("spec") or {}), resource.metadata)
        other = rival(list(autoscalers.get(spec.topic, [])), me)
        if other is not None:  # the older one decides; this one waits until it is deleted
            self.close()
            self.samples = []
            self._refuse(
                "TopicHasAutoscaler",
                f"the TopicAutoscaler {other} (the older) grows topic {spec.topic!r}; this one decides "
                "nothing until that one is deleted",
            )
            return interval
        try:
            meter = self._meter(resource)
            measured = meter.measure()
        except KafkaConnectionError as error:
            self.resolved = None
            self._refuse("InvalidKafkaConnection", f"{error}; nothing was changed")
            return max(interval, 10.0)
        except TopicMissing as error:
            self._refuse("TopicMissing", f"{error}; nothing was changed")
            return interval
        except Exception as error:  # Kafka unreachable, a request timed out: measure again later
            self.resolved = None  # credentials may have been rotated: read the Secrets again
            metrics.record_error(metrics.error_kind(error))
            _log.warning("%s/%s: measuring failed: %s", self.namespace, self.name, error)
            return interval
        if measured is None:
            return interval
        now = measured.load.at
        self.samples = [s for s in self.samples if s.at >= now - spec.stabilization_window_seconds - 60]
        self.samples.append(measured.load)
        entries = list(index.get(spec.topic, []))
        busy = self._in_flight(spec.topic, entries, index)
        ended = [e for e in (last_end(entries), self.status.expansion_ended_at) if e is not None]
        situation = Situation(
            now, measured.partitions, self.samples, busy, _monotonic(max(ended, default=None))
        )
        decision = decide(situation, _policy(resource, self.settings))
        if decision.outcome == Outcome.GROW and not self._grow(resource, measured.partitions, decision):
            return interval  # refused: the condition says why until it can be done
        self._show(resource, measured.partitions, measured.records_per_offset, decision)
        return interval

    def _meter(self, resource: TopicAutoscaler) -> LoadMeter:
        """The meter for the spec's topic, groups and connection (a new one when they changed)."""
        spec = resource.spec
        connection = spec.kafka.model_dump_json() if spec.kafka is not None else ""
        if resolve_due(self.resolved, connection, time.monotonic()):  # Secrets read only then
            self.config = kafka_config(spec.kafka, self.namespace, self.settings)
            self.resolved = (connection, time.monotonic())
        side: KafkaSide = clients_for(self.config, self.settings)  # the same clients for the same config
        groups = tuple(g.name for g in spec.targets.consumer_groups)
        wanted = (spec.topic, groups, id(side))
        if self.meter is None or self.measuring != wanted:
            self.close()
            self.meter, self.measuring, self.samples = LoadMeter(side, spec.topic, groups), wanted, []
        self._clear("InvalidSpec", "InvalidKafkaConnection", "TopicMissing", "TopicHasAutoscaler")
        return self.meter

    def _in_flight(self, topic: str, entries: list[ExpansionEntry], index: _Index) -> str | None:
        """The topic's expansion in flight (any owner); this autoscaler's own one that ended is
        forgotten, its end (by its own status when the index has it) kept for the cooldown."""
        assert self.status is not None
        own = self.status.expansion
        if own is not None and not self._running(own, index):
            self.status.expansion = None
            self.status.expansion_ended_at = _ended(f"{self.namespace}/{own}", entries) or datetime.now(UTC)
        return in_flight(index, topic) or self.status.expansion

    def _phase(self, expansion: str) -> str | None:
        """An expansion's phase as the API server has it; None when there is no such expansion."""
        try:
            found = CustomObjectsApi(api_client()).get_namespaced_custom_object(
                API_GROUP, VERSION, self.namespace, EXPANSIONS, expansion
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return str((dict(found).get("status") or {}).get("phase", "Pending"))  # type: ignore[call-overload]

    def _running(self, expansion: str, index: _Index) -> bool:
        """Whether this autoscaler's expansion has not ended (not yet in the index: asked directly)."""
        key = f"{self.namespace}/{expansion}"
        for entries in list(index.values()):
            for listed, phase, _, _ in list(entries):
                if listed == key:
                    return phase not in ENDED
        found = self._phase(expansion)
        return found is not None and found not in ENDED

    def _grow(self, resource: TopicAutoscaler, current: int, decision: Decision) -> bool:
        """Create the expansion ``decision`` names; False when that cannot be done (said)."""
        assert self.status is not None and decision.target is not None
        name = f"{self.name}-{decision.target}"
        try:
            CustomObjectsApi(api_client()).create_namespaced_custom_object(
                API_GROUP,
                VERSION,
                self.namespace,
                EXPANSIONS,
                expansion_body(resource, name, decision.target),
            )
        except ApiException as error:
            if error.status != 409:
                self._refuse("ExpansionRefused", f"creating {name} was refused: {error.reason} {error.body}")
                return False
            refusal = after_conflict(name, self._phase(name), decision.target)  # 409: that name exists
            if refusal is not None:
                self._refuse("ExpansionEnded", refusal)
                return False
        self._clear("ExpansionRefused", "ExpansionEnded")
        self.status.expansion = name
        self.status.last_decision = ScalingDecision(
            time=datetime.now(UTC),
            from_partitions=current,
            to_partitions=decision.target,
            reason=decision.reason,
            expansion=name,
        )
        metrics.record_autoscaler_decision("grow")
        kopf.event(self.body, type="Normal", reason="Decided", message=f"{decision.reason}: created {name}")
        _log.info("%s/%s: %s: created %s", self.namespace, self.name, decision.reason, name)
        self.written = 0.0  # shown at once
        return True

    def _show(self, resource: TopicAutoscaler, current: int, per_offset: float, decision: Decision) -> None:
        """Status, conditions, Events on their transitions and metrics for this decision."""
        assert self.status is not None
        newest = self.samples[-1]
        load = measured_load(newest, current, per_offset, datetime.now(UTC))
        generation = resource.metadata.get("generation")
        after = shown(self.status, decision, current, load, resource.spec.max_partitions, generation)
        self.status = after.status
        for event in after.events:
            kopf.event(self.body, type=event.type, reason=event.reason, message=event.message)
            metrics.record_autoscaler_decision(event.reason[0].lower() + event.reason[1:])
        metrics.record_autoscaler(
            self.namespace,
            self.name,
            current=current,
            desired=decision.desired,
            records=newest.records_per_second,
        )
        refresh = min(STATUS_EVERY_SECONDS, 5 * resource.spec.measure_interval_seconds)
        if after.changed or time.monotonic() - self.written >= refresh:
            self._write()

    def _refuse(self, reason: str, message: str) -> None:
        """Bad input: Ready False with ``reason``, a Warning Event once per cause; nothing else changes."""
        self.status, event = refused(self.status or TopicAutoscalerStatus(), reason, message, self.said)
        if event is not None:
            self.said = message
            kopf.event(self.body, type=event.type, reason=event.reason, message=event.message)
            _log.warning("%s/%s: %s", self.namespace, self.name, message)
            self._write()

    def _clear(self, *reasons: str) -> None:
        """A cause of refusal is gone: the next refusal is news again."""
        if self.status is not None and forget_refusal(self.status, reasons):
            self.said = None

    def _write(self) -> None:
        assert self.status is not None
        patch = status_patch(self.status)
        if self.status.expansion is None:
            patch["expansion"] = None  # a merge patch's null removes the ended expansion's name
        try:
            CustomObjectsApi(api_client()).patch_namespaced_custom_object_status(
                API_GROUP, VERSION, self.namespace, PLURAL, self.name, {"status": patch}
            )
            self.written = time.monotonic()
        except ApiException as error:
            if error.status != 404:  # deleted meanwhile: the daemon stops
                raise

    def close(self) -> None:
        if self.meter is not None:
            self.meter.close()
            self.meter = None
            self.measuring = None


def _ended(key: str, entries: list[ExpansionEntry]) -> datetime | None:
    """When the expansion ``key`` ended, by its own status as the index has it."""
    return last_end([e for e in entries if e[0] == key])


def _monotonic(moment: datetime | None) -> float | None:
    """A wall-clock moment on the monotonic clock the samples use."""
    if moment is None:
        return None
    return time.monotonic() - (datetime.now(UTC) - moment).total_seconds()
