"""API semantics, independent of HTTP: metadata, optimistic concurrency, finalizers, status
subresource, CRD registration, schema admission, namespaces and owner-reference cleanup.

Differences from a real apiserver, on purpose: no admission webhooks, RBAC or managedFields;
apply patches are refused (415); core/v1 and events.k8s.io/v1 Events are stored separately;
namespace deletion is immediate once its contents are gone; generation exists on custom
kinds, CRDs and Pods only (as on recent servers), bumped on changes outside metadata/status and
when deletion starts.
"""

from __future__ import annotations

import json
import random
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from . import events
from . import patch as patching
from .errors import (
    ApiError,
    already_exists,
    bad_request,
    conflict,
    invalid,
    no_such_path,
    not_found,
    unprocessable,
)
from .resources import Registry, ResourceType, builtin_types, from_crd
from .schema import admit
from .selectors import Matcher
from .store import Store

JSON = dict[str, Any]

CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"  # both its id and its storage key
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_STRATEGIES = {"pods": patching.POD, "namespaces": patching.NAMESPACE}
# Server-owned metadata a client cannot change by an update or a patch.
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _copy(obj: JSON) -> JSON:
    result: JSON = json.loads(json.dumps(obj))  # faster than copy.deepcopy for JSON data
    return result


def _body(obj: JSON, status: bool) -> JSON:
    """What counts for metadata.generation: everything but metadata (and status if a subresource)."""
    drop = ("metadata", "status") if status else ("metadata",)
    return {k: v for k, v in obj.items() if k not in drop}


class Cluster:
    def __init__(self, store: Store | None = None, strict_namespaces: bool = True):
        self.store = store or Store()
        self.registry = Registry()
        self.strict_namespaces = strict_namespaces
        # Deferred work (graceful pod removal, garbage collection); the server plugs in its loop.
        self.later: Callable[[float, Callable[[], None]], object] = lambda delay, fn: (
            fn() if delay <= 0 else None
        )
        for rt in builtin_types():
            self.registry.add(rt)
        for ns in DEFAULT_NAMESPACES:
            self._ensure_namespace(ns)

    # --- lookups ------------------------------------------------------------------------------

    def resolve(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self.registry.lookup(group, version, plural)
        if rt is None:
            raise no_such_path()
        return rt

    def get(self, rt: ResourceType, ns: str, name: str) -> JSON:
        obj = self.store.get(rt.key, ns if rt.namespaced else "", name)
        if obj is None:
            raise not_found(rt.plural, rt.group, name)
        return obj

    def list(self, rt: ResourceType, ns: str | None, match: Matcher) -> list[JSON]:
        return [o for o in self.store.items(rt.key, ns if rt.namespaced else None) if match(o)]

    @staticmethod
    def view(rt: ResourceType, version: str, obj: JSON) -> JSON:
        """The object as a client of ``version`` sees it (same data: no conversion webhooks)."""
        api_version = rt.api_version(version)
        if rt.stored_as:
            return events.to_v1(obj, api_version)
        return obj if obj.get("apiVersion") == api_version else {**obj, "apiVersion": api_version}

    def _storage(self, rt: ResourceType, version: str, body: Any) -> tuple[ResourceType, str, Any]:
        """The kind (and version, body) a write is stored as."""
        owner = self.registry.by_key(rt.key) if rt.stored_as else None
        if owner is None:
            return rt, version, body
        return owner, owner.versions[0], events.to_core(body) if isinstance(body, dict) else body

    # --- create -------------------------------------------------------------------------------

    def create(self, rt: ResourceType, version: str, ns: str, body: Any, dry_run: bool = False) -> JSON:
        rt, version, body = self._storage(rt, version, body)
        obj = self._check_body(rt, version, body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        ns = self._check_namespace(rt, ns, meta, creating=True)
        name: str = meta.get("name") or ""
        if not name:
            prefix = meta.get("generateName")
            if not prefix:
                raise invalid(
                    rt.kind, rt.group, "", [_required("metadata.name", "name or generateName is required")]
                )
            for _ in range(8):
                name = str(prefix) + "".join(random.choices(_SUFFIX_CHARS, k=5))
                if self.store.get(rt.key, ns, name) is None:
                    break
            meta["name"] = name
        self._check_name(rt, name)
        if self.store.get(rt.key, ns, name) is not None:
            raise already_exists(rt.plural, rt.group, name)
        for k in (*_SERVER_META, "resourceVersion", "selfLink", "managedFields"):
            meta.pop(k, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now()
        if rt.has_generation:
            meta["generation"] = 1
        self._initial_status(rt, obj)
        self._admit(rt, version, obj)
        if rt.key == CRD_KEY:
            self._crd_admit(obj)
        if dry_run:
            return obj
        stored = self.store.write(rt.key, "ADDED", obj)
        if rt.key == CRD_KEY:
            self.registry.add(from_crd(stored))
        return stored

    def _check_body(self, rt: ResourceType, version: str, body: Any) -> JSON:
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        if body.get("kind", rt.kind) != rt.kind:
            raise bad_request(
                f"the kind in the data ({body['kind']}) does not match the expected kind ({rt.kind})"
            )
        body["kind"] = rt.kind
        body["apiVersion"] = rt.api_version(version)
        return body

    def _check_namespace(self, rt: ResourceType, ns: str, meta: JSON, creating: bool) -> str:
        if not rt.namespaced:
            meta.pop("namespace", None)
            return ""
        if meta.get("namespace") and meta["namespace"] != ns:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = ns
        if creating and self.strict_namespaces:
            space = self.store.get("namespaces", "", ns)
            if space is None:
                raise not_found("namespaces", "", ns)
            if space["metadata"].get("deletionTimestamp"):
                raise ApiError(
                    403,
                    f"{rt.plural} is forbidden: unable to create new content in namespace {ns} "
                    "because it is being terminated",
                )
        return ns

    def _check_name(self, rt: ResourceType, name: str) -> None:
        if rt.plural == "namespaces":
            pattern, what, limit = _LABEL, "RFC 1123 label", 63
        else:
            pattern, what, limit = _SUBDOMAIN, "RFC 1123 subdomain", 253
        if len(name) <= limit and re.fullmatch(pattern, name):
            return
        msg = (
            f"Invalid value: {json.dumps(name)}: a lowercase {what} must consist of lower case alphanumeric "
            f"characters, '-'{' or ' + repr('.') if '.' in pattern else ''}, and must start and end with an "
            f"alphanumeric character (regex used for validation is '{pattern}')"
        )
        raise invalid(
            rt.kind,
            rt.group,
            name,
            [{"reason": "FieldValueInvalid", "message": msg, "field": "metadata.name"}],
        )

    def _initial_status(self, rt: ResourceType, obj: JSON) -> None:
        if rt.plural == "pods" and not rt.group:
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif rt.plural == "namespaces" and not rt.group:
            obj["status"] = {"phase": "Active"}
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        elif rt.key == CRD_KEY:
            spec = obj.get("spec", {})
            cond = {"status": "True", "lastTransitionTime": now()}
            accepted = {
                **cond,
                "type": "NamesAccepted",
                "reason": "NoConflicts",
                "message": "no conflicts found",
            }
            established = {**cond, "type": "Established", "reason": "InitialNamesAccepted",
                           "message": "the initial names have been accepted"}  # fmt: skip
            obj["status"] = {
                "acceptedNames": spec.get("names", {}),
                "storedVersions": [v["name"] for v in spec.get("versions", []) if v.get("storage")],
                "conditions": [accepted, established],
            }
        elif rt.status_subresource:
            obj.pop("status", None)  # custom kinds: status is written through /status only

    def _admit(self, rt: ResourceType, version: str, obj: JSON) -> None:
        if rt.custom:
            causes = admit(rt.schemas.get(version) or {}, obj)
            if causes:
                raise invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), causes)

    def _crd_admit(self, crd: JSON) -> None:
        spec = crd.get("spec") or {}
        try:
            expected = f"{spec['names']['plural']}.{spec['group']}"
            rt = from_crd(crd)
        except (KeyError, TypeError) as e:
            cause = _required(f"spec.{e.args[0] if e.args else ''}", "Required value")
            raise invalid(
                "CustomResourceDefinition", "apiextensions.k8s.io", crd["metadata"]["name"], [cause]
            ) from e
        name = crd["metadata"]["name"]
        if name != expected:
            cause = {
                "reason": "FieldValueInvalid",
                "message": f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
                "field": "metadata.name",
            }
            raise invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, [cause])
        if not rt.versions:
            cause = _required("spec.versions", "must have exactly one version marked as storage version")
            raise invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, [cause])

    # --- update / patch -------------------------------------------------------------------------

    def replace(
        self, rt: ResourceType, version: str, ns: str, name: str, body: Any, subresource: str | None = None
    ) -> JSON:
        old = self.get(rt, ns, name)
        rt, version, body = self._storage(rt, version, body)
        new = self._check_body(rt, version, body)
        meta = new.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        self._check_namespace(rt, ns, meta, creating=False)
        rv = meta.get("resourceVersion")
        if not rv and rt.custom:
            cause = {
                "reason": "FieldValueInvalid",
                "message": "Invalid value: 0x0: must be specified for an update",
                "field": "metadata.resourceVersion",
            }
            raise invalid(rt.kind, rt.group, name, [cause])
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(rt.plural, rt.group, name)
        return self._update(rt, version, old, new, subresource)

    def patch(
        self,
        rt: ResourceType,
        version: str,
        ns: str,
        name: str,
        content_type: str,
        raw: bytes,
        subresource: str | None = None,
    ) -> JSON:
        old = self.get(rt, ns, name)
        doc = _copy(self.view(rt, version, old))
        try:
            body = patching.loads(raw)
            if content_type == "application/merge-patch+json":
                if not isinstance(body, dict):
                    raise patching.PatchError("merge patch must be a JSON object", malformed=True)
                new = patching.merge_patch(doc, body)
            elif content_type == "application/json-patch+json":
                new = patching.json_patch(doc, body)
            elif content_type == "application/strategic-merge-patch+json" and not rt.custom:
                new = patching.strategic_merge(doc, body, _STRATEGIES.get(rt.plural, patching.DEFAULT))
            else:
                accepted = "application/json-patch+json, application/merge-patch+json"
                if not rt.custom:
                    accepted += ", application/strategic-merge-patch+json"
                raise ApiError(
                    415,
                    "the body of the request was in an unknown format - "
                    f"accepted media types include: {accepted}",
                )
        except patching.PatchError as e:
            raise bad_request(str(e)) if e.malformed else unprocessable(str(e)) from e
        if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
            raise bad_request("the patched object must be a JSON object with metadata")
        rt, version, new = self._storage(rt, version, new)
        rv = new["metadata"].get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(rt.plural, rt.group, name)
        new["metadata"]["name"] = name
        self._check_namespace(rt, ns, new["metadata"], creating=False)
        return self._update(rt, version, old, self._check_body(rt, version, new), subresource)

    def _update(self, rt: ResourceType, version: str, old: JSON, new: JSON, subresource: str | None) -> JSON:
        if subresource == "status":
            status = new.get("status")
            new = {k: v for k, v in old.items() if k != "status"}
            new["apiVersion"] = rt.api_version(version)
            if status is not None:
                new["status"] = status
            new["metadata"] = dict(old["metadata"])
        else:
            if rt.status_subresource:
                new.pop("status", None)
                if "status" in old:
                    new["status"] = old["status"]
            meta, old_meta = new["metadata"], old["metadata"]
            for k in _SERVER_META:
                meta.pop(k, None)
                if k in old_meta:
                    meta[k] = old_meta[k]
            if old_meta.get("deletionTimestamp"):
                added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
                if added:
                    cause = {
                        "reason": "FieldValueForbidden",
                        "message": "Forbidden: no new finalizers can be added if the object is being "
                        f"deleted, found new finalizers {json.dumps(sorted(added))}",
                        "field": "metadata.finalizers",
                    }
                    raise invalid(rt.kind, rt.group, meta["name"], [cause])
        self._admit(rt, version, new)
        if rt.key == CRD_KEY:
            self._crd_admit(new)
        if rt.has_generation and _body(new, rt.status_subresource) != _body(old, rt.status_subresource):
            new["metadata"]["generation"] = old["metadata"].get("generation", 0) + 1
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if self.view(rt, version, old) == new:
            return old  # a no-op write: no new resourceVersion, no watch event (as the real server)
        meta = new["metadata"]
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not meta.get("deletionGracePeriodSeconds")
        ):
            return self._remove(rt, new)  # the last finalizer is gone (a graceful pod waits for its kubelet)
        stored = self.store.write(rt.key, "MODIFIED", new, old)
        if rt.key == CRD_KEY:
            self.registry.add(from_crd(stored))
        return stored

    # --- delete -------------------------------------------------------------------------------

    def delete(self, rt: ResourceType, ns: str, name: str, options: JSON | None = None) -> JSON:
        options = options or {}
        old = self.get(rt, ns, name)
        meta = old["metadata"]
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta["uid"]:
            why = f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta['uid']}"
            raise conflict(rt.plural, rt.group, name, why)
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            why = (
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta['resourceVersion']}"
            )
            raise conflict(rt.plural, rt.group, name, why)
        if rt.plural == "namespaces" and not rt.group:
            return self._delete_namespace(old)
        grace = self._grace(rt, old, options)
        if meta.get("finalizers") or grace > 0:
            if meta.get("deletionTimestamp") and grace >= (meta.get("deletionGracePeriodSeconds") or 0):
                return old  # deletion already under way
            return self._start_deletion(rt, old, grace)
        return self._remove(rt, old)

    def _grace(self, rt: ResourceType, obj: JSON, options: JSON) -> int:
        """Pods bound to a node terminate gracefully (their kubelet confirms); everything else at once."""
        if rt.plural != "pods" or rt.group or not obj.get("spec", {}).get("nodeName"):
            return 0
        grace = options.get("gracePeriodSeconds")
        if grace is None:
            grace = obj["spec"].get("terminationGracePeriodSeconds", 30)
        return max(int(grace), 0)

    def _start_deletion(self, rt: ResourceType, old: JSON, grace: int) -> JSON:
        meta = dict(old["metadata"])
        meta.setdefault(
            "deletionTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + grace))
        )
        meta["deletionGracePeriodSeconds"] = grace
        if rt.has_generation:
            meta["generation"] = meta.get("generation", 0) + 1
        stored = self.store.write(rt.key, "MODIFIED", {**old, "metadata": meta}, old)
        if grace > 0:  # no kubelet confirms by itself: remove when the grace period is over
            ns, name, uid = meta.get("namespace", ""), meta["name"], meta["uid"]
            self.later(grace, lambda: self._expire(rt, ns, name, uid))
        return stored

    def _expire(self, rt: ResourceType, ns: str, name: str, uid: str) -> None:
        obj = self.store.get(rt.key, ns, name)
        if obj is not None and obj["metadata"]["uid"] == uid and not obj["metadata"].get("finalizers"):
            self._remove(rt, obj)

    def _remove(self, rt: ResourceType, obj: JSON) -> JSON:
        gone = self.store.write(rt.key, "DELETED", obj, obj)
        meta = gone["metadata"]
        if rt.key == CRD_KEY:
            self._drop_kind(gone)
        uid, ns = meta["uid"], meta.get("namespace")
        self.later(0, lambda: self._collect(uid))
        if ns:
            self._finish_namespace(ns)
        return gone

    def _drop_kind(self, crd: JSON) -> None:
        rt = from_crd(crd)
        for obj in self.store.items(rt.key):
            self.store.write(rt.key, "DELETED", obj, obj)
        self.registry.remove(rt.id)

    def _collect(self, owner_uid: str) -> None:
        """Garbage-collect dependents whose every owner is gone (background propagation)."""
        for key, ns, name in self.store.dependents(owner_uid):
            obj, rt = self.store.get(key, ns, name), self.registry.by_key(key)
            if obj is None or rt is None:
                continue
            rest = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid]
            if rest:
                meta = {**obj["metadata"], "ownerReferences": rest}
                self.store.write(key, "MODIFIED", {**obj, "metadata": meta}, obj)
            else:
                self.delete(rt, ns, name)

    # --- namespaces ---------------------------------------------------------------------------

    def _ensure_namespace(self, name: str) -> None:
        if self.store.get("namespaces", "", name) is None:
            rt = self.registry.lookup("", "v1", "namespaces")
            assert rt is not None
            self.create(rt, "v1", "", {"metadata": {"name": name}})

    def _delete_namespace(self, ns_obj: JSON) -> JSON:
        rt = self.registry.lookup("", "v1", "namespaces")
        assert rt is not None
        name = ns_obj["metadata"]["name"]
        if not ns_obj["metadata"].get("deletionTimestamp"):
            meta = {**ns_obj["metadata"], "deletionTimestamp": now(), "deletionGracePeriodSeconds": 0}
            ns_obj = self.store.write(
                rt.key, "MODIFIED", {**ns_obj, "metadata": meta, "status": {"phase": "Terminating"}}, ns_obj
            )
        for kind in self.registry:
            if kind.namespaced:
                for obj in self.store.items(kind.key, name):
                    if not obj["metadata"].get("deletionTimestamp"):
                        self.delete(kind, name, obj["metadata"]["name"], {"gracePeriodSeconds": 0})
        self._finish_namespace(name)
        return ns_obj

    def _finish_namespace(self, name: str) -> None:
        ns_obj = self.store.get("namespaces", "", name)
        if ns_obj is None or not ns_obj["metadata"].get("deletionTimestamp"):
            return
        if any(self.store.any_in(rt.key, name) for rt in self.registry if rt.namespaced):
            return
        self.store.write("namespaces", "DELETED", ns_obj, ns_obj)

    # --- CRDs and persistence -----------------------------------------------------------------

    def apply_crd(self, crd: JSON) -> JSON:
        """Create or overwrite a CRD (as ``kubectl apply`` would), registering its kind."""
        rt = self.registry.by_key(CRD_KEY)
        assert rt is not None
        name = crd.get("metadata", {}).get("name", "")
        old = self.store.get(CRD_KEY, "", name)
        if old is None:
            return self.create(rt, "v1", "", crd)
        crd.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
        return self.replace(rt, "v1", "", name, crd)

    def restore(self, snapshot: JSON) -> None:
        self.store.restore(snapshot)
        for crd in self.store.items(CRD_KEY):
            self.registry.add(from_crd(crd))


def _required(field: str, detail: str) -> JSON:
    message = "Required value" if detail == "Required value" else f"Required value: {detail}"
    return {"reason": "FieldValueRequired", "message": message, "field": field}
