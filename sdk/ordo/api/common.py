"""Shapes shared by ordo's custom resources: conditions, label selectors, CEL rules (the Kafka
connection is :mod:`ordo.api.kafka`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from pydantic.alias_generators import to_camel

__all__ = [
    "API_GROUP",
    "API_VERSION",
    "PAUSED",
    "PAUSE_ANNOTATION",
    "Condition",
    "CrdInfo",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Model",
    "PrinterColumn",
    "Resource",
    "Validation",
    "first_error",
    "reconciliation_paused",
    "set_condition",
]

API_GROUP = "ordo.dev"
VERSION = "v1alpha1"
API_VERSION: Literal["ordo.dev/v1alpha1"] = "ordo.dev/v1alpha1"

PAUSE_ANNOTATION = "ordo.dev/pause-reconciliation"
"""Set to "true" on a ProducerGroup, an OrderedTopicExpansion or a TopicAutoscaler, the operator
leaves it as it is until the annotation goes (as Strimzi's ``strimzi.io/pause-reconciliation``)."""
PAUSED = "ReconciliationPaused"
"""What a paused resource's status says: a condition's type or reason, Strimzi's name for it."""

TOPIC_PATTERN = r"^[a-zA-Z0-9._-]{1,249}$"
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class Model(BaseModel):
    """camelCase on the wire (Kubernetes style), snake_case in Python; unknown fields are errors."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(Model):
    """A condition in the standard Kubernetes shape (metav1.Condition)."""

    type: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9]*$", max_length=316, description="Condition type.")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        max_length=1024,
        description="Machine-readable CamelCase reason for the last transition.",
    )
    message: str = Field(default="", max_length=32768, description="Human-readable details.")
    last_transition_time: datetime = Field(description="When the status last changed.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation the condition was computed from."
    )


def set_condition(
    conditions: Iterable[Condition],
    type: str,
    status: bool | ConditionStatus,
    reason: str,
    message: str = "",
    observed_generation: int | None = None,
    now: datetime | None = None,
) -> list[Condition]:
    """The list with condition ``type`` set; lastTransitionTime changes only when status does."""
    if isinstance(status, bool):
        status = ConditionStatus.TRUE if status else ConditionStatus.FALSE
    result: list[Condition] = []
    previous: Condition | None = None
    for condition in conditions:
        if condition.type == type:
            previous = condition
        else:
            result.append(condition)
    when = (
        previous.last_transition_time
        if previous is not None and previous.status == status
        else (now or datetime.now(UTC)).replace(microsecond=0)
    )
    result.append(
        Condition(
            type=type,
            status=status,
            reason=reason,
            message=message,
            last_transition_time=when,
            observed_generation=observed_generation,
        )
    )
    return sorted(result, key=lambda c: c.type)


class LabelSelectorRequirement(Model):
    key: str = Field(min_length=1, description="The label key the selector applies to.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(description="Set-based operator.")
    values: list[str] = Field(default_factory=list, description="Values for In and NotIn.")


class LabelSelector(Model):
    """A standard Kubernetes label selector."""

    match_labels: dict[str, str] = Field(default_factory=dict, description="Labels a pod must have.")
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, description="Set-based requirements, all must hold."
    )

    def to_query(self) -> str:
        """The selector as a ``labelSelector`` query string."""
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        for req in self.match_expressions:
            if req.operator == "Exists":
                parts.append(req.key)
            elif req.operator == "DoesNotExist":
                parts.append(f"!{req.key}")
            else:
                op = "in" if req.operator == "In" else "notin"
                parts.append(f"{req.key} {op} ({','.join(req.values)})")
        return ",".join(parts)

    def matches(self, labels: dict[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        for req in self.match_expressions:
            present = req.key in labels
            ok = {
                "Exists": present,
                "DoesNotExist": not present,
                "In": present and labels[req.key] in req.values,
                "NotIn": not present or labels[req.key] not in req.values,
            }[req.operator]
            if not ok:
                return False
        return True


class PrinterColumn(BaseModel):
    name: str
    type: Literal["string", "integer", "number", "boolean", "date"]
    json_path: str
    description: str = ""
    priority: int = 0


class Validation(BaseModel):
    """A CEL rule the API server checks on create and update (``x-kubernetes-validations``);
    ``oldSelf`` makes it a rule on changes. The message says what to do instead."""

    rule: str
    message: str

    def as_schema(self) -> dict[str, JsonValue]:
        return {"rule": self.rule, "message": self.message}


class CrdInfo(BaseModel):
    """What a resource model needs to become a CustomResourceDefinition."""

    kind: str
    plural: str
    singular: str
    short_names: list[str]
    categories: list[str] = ["ordo"]
    printer_columns: list[PrinterColumn] = []
    validations: list[Validation] = []  # on the whole object (rules that need status or metadata)

    @property
    def name(self) -> str:
        return f"{self.plural}.{API_GROUP}"


class Resource(Model):
    """Base of ordo's custom resources: apiVersion, kind, metadata, spec and status."""

    crd: ClassVar[CrdInfo]
    api_version: Literal["ordo.dev/v1alpha1"] = API_VERSION
    kind: str
    metadata: dict[str, Any] = Field(default_factory=dict)


def first_error(error: ValidationError, within: str = "") -> str:
    """A model's first validation error as "where: what", said to whoever wrote the value:
    ``where`` is its field's path (below ``within``, the value's own place, when given), ``what``
    pydantic's message without its "Value error, " prefix."""
    first = error.errors()[0]
    where = ".".join([*([within] if within else []), *(str(part) for part in first["loc"])])
    return f"{where}: {first['msg'].removeprefix('Value error, ')}"


def reconciliation_paused(metadata: Mapping[str, Any]) -> bool:
    """Whether ``metadata``'s annotations pause the resource's reconciliation (PAUSE_ANNOTATION
    set to "true", in any case)."""
    value = (metadata.get("annotations") or {}).get(PAUSE_ANNOTATION)
    return isinstance(value, str) and value.strip().lower() == "true"
