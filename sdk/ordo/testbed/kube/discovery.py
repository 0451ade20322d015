"""Discovery documents, legacy (``/api``, ``/apis``, ``/apis/<g>/<v>``) and aggregated (v2/v2beta1),
built from the registry on every request so new CRDs show up at once."""

from __future__ import annotations

from typing import Any

from .resources import VERBS, Registry, ResourceType

JSON = dict[str, Any]

VERSION = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.0+ordo-testbed",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-11-22T00:00:00Z",
    "goVersion": "go1.22.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_SUB_VERBS = ["get", "patch", "update"]


def _group_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def api_versions(address: str) -> JSON:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def api_group(name: str, versions: list[str]) -> JSON:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": entries,
        "preferredVersion": entries[0],
    }


def api_groups(registry: Registry) -> JSON:
    groups = [api_group(g, vs) for g, vs in registry.groups().items() if g]
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [{k: v for k, v in g.items() if k not in ("kind", "apiVersion")} for g in groups],
    }


def resource_list(registry: Registry, group: str, version: str) -> JSON | None:
    kinds = [rt for rt in registry if rt.group == group and version in rt.versions]
    if not kinds:
        return None
    resources: list[JSON] = []
    for rt in kinds:
        entry: JSON = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(VERBS),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        resources.append(entry)
        if rt.status_subresource:
            sub = {"name": f"{rt.plural}/status", "singularName": "", "namespaced": rt.namespaced}
            resources.append({**sub, "kind": rt.kind, "verbs": _SUB_VERBS})
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": _group_version(group, version),
        "resources": resources,
    }


def _aggregated_resource(rt: ResourceType, version: str) -> JSON:
    kind = {"group": rt.group, "version": version, "kind": rt.kind}
    entry: JSON = {
        "resource": rt.plural,
        "responseKind": kind,
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": list(VERBS),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    if rt.status_subresource:
        entry["subresources"] = [{"subresource": "status", "responseKind": kind, "verbs": _SUB_VERBS}]
    return entry


def aggregated(registry: Registry, core: bool, api_version: str) -> JSON:
    """``APIGroupDiscoveryList`` for ``/api`` (core=True) or ``/apis``; ``api_version`` is
    ``apidiscovery.k8s.io/v2`` or ``.../v2beta1``, whichever the client asked for."""
    items: list[JSON] = []
    for group, versions in registry.groups().items():
        if (group == "") != core:
            continue
        entries = [
            {
                "version": v,
                "resources": [
                    _aggregated_resource(rt, v) for rt in registry if rt.group == group and v in rt.versions
                ],
                "freshness": "Current",
            }
            for v in versions
        ]
        items.append({"metadata": {"name": group} if group else {}, "versions": entries})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items}
