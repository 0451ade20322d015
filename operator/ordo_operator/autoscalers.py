"""kopf handlers for TopicAutoscaler: a daemon per autoscaler measures its topic's load from Kafka
every ``measureIntervalSeconds`` (``ordo_operator.load``), asks ``plans.autoscale.decide`` what to
do, and creates the OrderedTopicExpansion it decides on, owned by the autoscaler and named after it
and the count (``<autoscaler>-<count>``), so an operator restarted after the create does not create
another. Bad input (a spec the model refuses, a connection that cannot be resolved, a missing
topic, an expansion the API server refuses) is a condition and a Warning Event; nothing changes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import kopf
from kubernetes.client import CustomObjectsApi
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from ordo.api import (
    API_GROUP,
    Condition,
    OrderedTopicExpansionSpec,
    TopicAutoscaler,
    TopicAutoscalerStatus,
)
from ordo.api.common import VERSION, set_condition
from ordo.api.topic_autoscaler import MeasuredLoad, ScalingDecision

from . import metrics
from .config import OperatorConfig
from .kafka import KafkaSide, clients_for
from .kube import KafkaConnectionError, api_client, kafka_config, status_patch
from .load import LoadMeter, TopicMissing
from .plans.autoscale import Decision, Load, Outcome, Policy, Situation, decide

__all__ = ["PLURAL", "register"]

PLURAL = "topicautoscalers"
EXPANSIONS = "orderedtopicexpansions"
ENDED = {"Completed", "Aborted", "Failed"}
STATUS_EVERY_SECONDS = 15.0  # the measured load in status is refreshed this often (or every 5 intervals)
_Index = kopf.Index[str, tuple[str, str, str, str]]
_log = logging.getLogger(__name__)


def register(settings: OperatorConfig) -> None:
    """Register the handlers with kopf (called once by the operator's entry point)."""

    @kopf.daemon(API_GROUP, VERSION, PLURAL, id="drive_autoscaler", cancellation_timeout=5.0, backoff=5.0)  # type: ignore[arg-type]
    @metrics.count_errors
    def drive_autoscaler(
        stopped: kopf.DaemonStopped,
        name: str,
        namespace: str,
        body: kopf.Body,
        expansions_by_topic: _Index,
        **_: Any,
    ) -> None:
        driver = _Driver(settings, namespace, name, body)
        try:
            while not stopped:
                started = time.monotonic()
                interval = driver.step(expansions_by_topic)
                stopped.wait(max(0.0, interval - (time.monotonic() - started)))
        finally:
            driver.close()
            metrics.forget_autoscaler(namespace, name)


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
            "labels": {"ordo.dev/autoscaler": str(meta.get("name", ""))},
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
    """One autoscaler's memory between measurements: its meter and the samples of its window."""

    settings: OperatorConfig
    namespace: str
    name: str
    body: kopf.Body
    meter: LoadMeter | None = None
    measuring: tuple[str, tuple[str, ...], int] | None = None  # topic, groups, id of the side
    samples: list[Load] = field(default_factory=list)
    status: TopicAutoscalerStatus | None = None
    written: float = 0.0
    said: dict[str, str] = field(default_factory=dict)  # condition type -> the reason last announced

    def step(self, index: _Index) -> float:
        """One measurement and decision; the seconds until the next."""
        try:
            resource = TopicAutoscaler.model_validate(dict(self.body))
        except ValidationError as error:  # what the CRD schema cannot check
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            self._refuse("InvalidSpec", f"{where}: {first['msg']}; nothing was changed")
            return 10.0
        interval = resource.spec.measure_interval_seconds
        if self.status is None:
            self.status = resource.status or TopicAutoscalerStatus()
        try:
            meter = self._meter(resource)
            measured = meter.measure()
        except KafkaConnectionError as error:
            self._refuse("InvalidKafkaConnection", f"{error}; nothing was changed")
            return max(interval, 10.0)
        except TopicMissing as error:
            self._refuse("TopicMissing", f"{error}; nothing was changed")
            return interval
        except Exception as error:  # Kafka unreachable, a request timed out: measure again later
            metrics.record_error(metrics.error_kind(error))
            _log.warning("%s/%s: measuring failed: %s", self.namespace, self.name, error)
            return interval
        if measured is None:
            return interval
        now = measured.load.at
        self.samples = [
            s for s in self.samples if s.at >= now - resource.spec.stabilization_window_seconds - 60
        ]
        self.samples.append(measured.load)
        busy, ended_at = self._expansions(resource, index)
        policy = _policy(resource, self.settings)
        situation = Situation(now, measured.partitions, self.samples, busy, _monotonic(ended_at))
        decision = decide(situation, policy)
        if decision.outcome == Outcome.GROW and not self._grow(resource, measured.partitions, decision):
            return interval  # refused: the condition says why until it can be done
        self._show(resource, measured.partitions, measured.records_per_offset, decision)
        return interval

    def _meter(self, resource: TopicAutoscaler) -> LoadMeter:
        """The meter for the spec's topic, groups and connection (a new one when they changed)."""
        spec = resource.spec
        side: KafkaSide = clients_for(kafka_config(spec.kafka, self.namespace, self.settings), self.settings)
        groups = tuple(g.name for g in spec.targets.consumer_groups)
        wanted = (spec.topic, groups, id(side))
        if self.meter is None or self.measuring != wanted:
            self.close()
            self.meter, self.measuring, self.samples = LoadMeter(side, spec.topic, groups), wanted, []
        self._clear("InvalidSpec", "InvalidKafkaConnection", "TopicMissing")
        return self.meter

    def _expansions(self, resource: TopicAutoscaler, index: _Index) -> tuple[str | None, datetime | None]:
        """The topic's expansion in flight (any owner), and when this autoscaler's last one ended."""
        assert self.status is not None
        own = self.status.expansion
        if own is not None and not self._running(own, index):
            self.status.expansion = None
            self.status.expansion_ended_at = datetime.now(UTC)
        busy = in_flight(index, resource.spec.topic)
        return busy or self.status.expansion, self.status.expansion_ended_at

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
            # 409: one of that name exists: created before a restart (in flight: adopted), or one
            # that ended without growing the topic, which a person must look at and delete
            ended = self._phase(name)
            if ended in ENDED:
                self._refuse(
                    "ExpansionEnded",
                    f"{name} exists and ended {ended} without growing the topic to {decision.target}: "
                    f"see its status, and delete it for the autoscaler to try again; nothing was changed",
                )
                return False
        self._clear("ExpansionRefused", "ExpansionEnded")
        when = datetime.now(UTC)
        self.status.expansion = name
        self.status.last_decision = ScalingDecision(
            time=when,
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
        status, generation = self.status, resource.metadata.get("generation")
        assert status is not None
        newest = self.samples[-1]
        status.load = MeasuredLoad(
            records_per_second_per_partition=round(newest.records_per_second / current, 3),
            bytes_per_second_per_partition=round(newest.bytes_per_second / current, 1),
            lag_per_partition={g: round(lag / current, 1) for g, lag in newest.lag.items()},
            records_per_offset=round(per_offset, 3),
            measured_at=datetime.now(UTC),
        )
        maximum = resource.spec.max_partitions
        at_max = decision.outcome == Outcome.AT_MAXIMUM
        conditions = set_condition(status.conditions, "Ready", True, "Measuring", decision.reason, generation)
        conditions = self._announced(
            conditions,
            "AtMaximum",
            at_max,
            f"{decision.reason}; the topic stays at {current} (maxPartitions {maximum})",
        )
        conditions = self._announced(
            conditions,
            "BelowCapacity",
            decision.below_capacity,
            f"{decision.reason}: half the partitions would carry the load; a topic cannot shrink in place "
            "(moving the stream to a topic with fewer partitions is a separate step)",
        )
        changed = (status.current_partitions, status.desired_partitions, _shape(status.conditions)) != (
            current,
            decision.desired,
            _shape(conditions),
        )
        status.current_partitions, status.desired_partitions = current, decision.desired
        status.conditions, status.message, status.observed_generation = (
            conditions,
            decision.reason,
            generation,
        )
        metrics.record_autoscaler(
            self.namespace,
            self.name,
            current=current,
            desired=decision.desired,
            records=newest.records_per_second,
        )
        refresh = min(STATUS_EVERY_SECONDS, 5 * resource.spec.measure_interval_seconds)
        if changed or time.monotonic() - self.written >= refresh:
            self._write()

    def _announced(
        self, conditions: list[Condition], kind: str, active: bool, message: str
    ) -> list[Condition]:
        """``conditions`` with ``kind`` set; entering it is an Event and a decision counted."""
        assert self.status is not None
        was = any(c.type == kind and c.status == "True" for c in self.status.conditions)
        if active and not was:
            kopf.event(self.body, type="Normal", reason=kind, message=message)
            metrics.record_autoscaler_decision(kind[0].lower() + kind[1:])
        return set_condition(
            conditions, kind, active, kind if active else "No" + kind, message if active else ""
        )

    def _refuse(self, reason: str, message: str) -> None:
        """Bad input: Ready False with ``reason``, a Warning Event once per cause; nothing else changes."""
        status = self.status or TopicAutoscalerStatus()
        self.status = status
        status.conditions = set_condition(status.conditions, "Ready", False, reason, message)
        status.message = message
        if self.said.get("Ready") != message:
            self.said["Ready"] = message
            kopf.event(self.body, type="Warning", reason=reason, message=message)
            _log.warning("%s/%s: %s", self.namespace, self.name, message)
            self._write()

    def _clear(self, *reasons: str) -> None:
        """A cause of refusal is gone: the next refusal is news again."""
        ready = next((c for c in (self.status.conditions if self.status else []) if c.type == "Ready"), None)
        if ready is not None and ready.reason in reasons:
            self.said.pop("Ready", None)

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


def _shape(conditions: list[Condition]) -> list[tuple[str, str, str]]:
    return [(c.type, c.status, c.reason) for c in conditions]


def _monotonic(moment: datetime | None) -> float | None:
    """A wall-clock moment on the monotonic clock the samples use."""
    if moment is None:
        return None
    return time.monotonic() - (datetime.now(UTC) - moment).total_seconds()
