"""Resource kinds the emulator serves: the built-ins ordo needs, plus one per CRD.

A kind is described by data only (:class:`ResourceType`), so a CRD with new fields, versions,
columns or names needs no code: :func:`from_crd` reads everything from the CRD object itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .events import SELECTABLE as EVENTS_V1_FIELDS

JSON = dict[str, Any]

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    versions: tuple[str, ...]  # served versions, preferred first
    kind: str
    plural: str
    singular: str
    namespaced: bool
    status_subresource: bool = False
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # Per served version: openAPIV3Schema (custom kinds only) and printer columns.
    schemas: dict[str, JSON] = field(default_factory=dict, compare=False, hash=False)
    columns: dict[str, list[JSON]] = field(default_factory=dict, compare=False, hash=False)
    # Built-ins with a real spec (pods) and all custom kinds carry metadata.generation.
    has_generation: bool = False
    custom: bool = False
    # Extra field-selector labels beyond metadata.name / metadata.namespace (label -> JSON path).
    selectable: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    # Stored as another kind's objects (events.k8s.io Events are core Events), converted in and out.
    stored_as: str = ""

    @property
    def id(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def key(self) -> str:
        """The storage key: one store per group+plural, whatever version a client uses."""
        return self.stored_as or self.id

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version


def _builtin(group: str, version: str, kind: str, plural: str, namespaced: bool, **kw: Any) -> ResourceType:
    return ResourceType(group, (version,), kind, plural, kind.lower(), namespaced, **kw)


_EVENT_FIELDS = {
    f"involvedObject.{k}": f"involvedObject.{k}"
    for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
} | {
    "reason": "reason",
    "type": "type",
    "source": "source.component",
    "reportingComponent": "reportingComponent",
}

_POD_FIELDS = {
    k: k
    for k in (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    )
}


def builtin_types() -> list[ResourceType]:
    return [
        _builtin("", "v1", "Namespace", "namespaces", False, short_names=("ns",), status_subresource=True,
                 selectable={"status.phase": "status.phase"}),
        _builtin("", "v1", "Pod", "pods", True, short_names=("po",), categories=("all",),
                 status_subresource=True, has_generation=True, selectable=_POD_FIELDS),
        _builtin("", "v1", "Event", "events", True, short_names=("ev",), selectable=_EVENT_FIELDS),
        _builtin("", "v1", "Secret", "secrets", True, selectable={"type": "type"}),
        _builtin("", "v1", "ConfigMap", "configmaps", True, short_names=("cm",)),
        _builtin("coordination.k8s.io", "v1", "Lease", "leases", True),
        _builtin("events.k8s.io", "v1", "Event", "events", True, short_names=("ev",), stored_as="events",
                 selectable=EVENTS_V1_FIELDS),
        _builtin("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False,
                 short_names=("crd", "crds"), status_subresource=True, has_generation=True),
    ]  # fmt: skip


def from_crd(crd: JSON) -> ResourceType:
    """The kind an ``apiextensions.k8s.io/v1`` CRD declares (its served versions, storage one first)."""
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec.get("versions", []) if v.get("served", True)]
    served.sort(key=lambda v: not v.get("storage", False))
    selectable: dict[str, str] = {}
    for v in served:
        for sf in v.get("selectableFields", []):
            path = sf["jsonPath"].lstrip(".")
            selectable[path] = path
    return ResourceType(
        group=spec["group"],
        versions=tuple(v["name"] for v in served),
        kind=names["kind"],
        plural=names["plural"],
        singular=names.get("singular") or names["kind"].lower(),
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        status_subresource=any("status" in (v.get("subresources") or {}) for v in served),
        short_names=tuple(names.get("shortNames", [])),
        categories=tuple(names.get("categories", [])),
        schemas={v["name"]: (v.get("schema") or {}).get("openAPIV3Schema") or {} for v in served},
        columns={v["name"]: v.get("additionalPrinterColumns", []) for v in served},
        has_generation=True,
        custom=True,
        selectable=selectable,
    )


class Registry:
    """Kinds by (group, version, plural), in registration order (discovery lists them so)."""

    def __init__(self) -> None:
        self._types: dict[str, ResourceType] = {}

    def add(self, rt: ResourceType) -> None:
        self._types[rt.id] = rt

    def remove(self, id_: str) -> ResourceType | None:
        return self._types.pop(id_, None)

    def by_key(self, key: str) -> ResourceType | None:
        """The kind that owns a storage key."""
        return self._types.get(key)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        rt = self._types.get(f"{plural}.{group}" if group else plural)
        return rt if rt is not None and version in rt.versions else None

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._types.values()))

    def groups(self) -> dict[str, list[str]]:
        """Group name -> versions (preferred first), core group under ""."""
        out: dict[str, list[str]] = {}
        for rt in self._types.values():
            versions = out.setdefault(rt.group, [])
            versions.extend(v for v in rt.versions if v not in versions)
        return out
