"""The three patch formats the apiserver accepts besides apply: JSON merge (RFC 7386), JSON patch
(RFC 6902) and strategic merge (Kubernetes' merge with per-field list strategies).

Functions return new documents and never modify their inputs. Errors are raised as
:class:`PatchError`; the server turns them into 422 (an op that cannot apply, e.g. a failed
``test``) or 400 (a patch that cannot even be read), as the real apiserver does.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


class PatchError(Exception):
    def __init__(self, message: str, malformed: bool = False):
        super().__init__(message)
        self.malformed = malformed  # True: 400 (unreadable patch); False: 422 (cannot apply)


def merge_patch(doc: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(doc) if isinstance(doc, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# --- JSON patch ---------------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer {path!r} must start with '/'", malformed=True)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, path: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r} in {path}")
    i = int(token)
    if i > len(container) or (i == len(container) and not allow_end):
        raise PatchError(f"array index {i} out of bounds in {path}")
    return i


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    cur = doc
    for t in tokens[:-1]:
        if isinstance(cur, dict) and t in cur:
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(cur, t, path, allow_end=False)]
        else:
            raise PatchError(f"doc is missing path: {path}")
    return cur


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens, path), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, allow_end=False)]
    raise PatchError(f"doc is missing path: {path}")


def _remove(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent, last = _parent(doc, tokens, path), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, path, allow_end=False))
    raise PatchError(f"unable to remove nonexistent key: {last}: missing value")


def _add(doc: Any, path: str, value: Any, replace: bool = False) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent, last = _parent(doc, tokens, path), tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"replace operation does not apply: doc is missing key: {path}: missing value")
        parent[last] = value
    elif isinstance(parent, list):
        if replace:
            parent[_index(parent, last, path, allow_end=False)] = value
        else:
            parent.insert(_index(parent, last, path, allow_end=True), value)
    else:
        raise PatchError(f"doc is missing path: {path}")
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise PatchError("json patch must be a list of operations", malformed=True)
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid json patch operation: {op!r}", malformed=True)
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"missing value for {kind} operation at {path}", malformed=True)
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op["value"]), replace=True)
        elif kind in ("move", "copy"):
            if "from" not in op:
                raise PatchError(f"missing from for {kind} operation at {path}", malformed=True)
            value = _remove(doc, op["from"]) if kind == "move" else copy.deepcopy(_get(doc, op["from"]))
            doc = _add(doc, path, value)
        elif kind == "test":
            try:
                actual = _get(doc, path)
            except PatchError:
                actual = None
            if actual != op["value"]:
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"unexpected operation {kind!r}", malformed=True)
    return doc


# --- strategic merge ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Strategy:
    """How a field merges: lists of maps by ``key``, primitive lists as sets, and children."""

    key: str | None = None  # merge key for lists of objects
    merge_primitives: bool = False  # lists of scalars merged as ordered sets (e.g. finalizers)
    fields: dict[str, Strategy] = field(default_factory=dict)


_CONTAINER = Strategy(
    key="name",
    fields={
        "env": Strategy(key="name"),
        "ports": Strategy(key="containerPort"),
        "volumeMounts": Strategy(key="mountPath"),
        "volumeDevices": Strategy(key="devicePath"),
    },
)
METADATA = Strategy(
    fields={"finalizers": Strategy(merge_primitives=True), "ownerReferences": Strategy(key="uid")}
)
POD = Strategy(
    fields={
        "metadata": METADATA,
        "spec": Strategy(
            fields={
                "containers": _CONTAINER,
                "initContainers": _CONTAINER,
                "ephemeralContainers": _CONTAINER,
                "volumes": Strategy(key="name"),
                "imagePullSecrets": Strategy(key="name"),
            }
        ),
        "status": Strategy(
            fields={
                "conditions": Strategy(key="type"),
                "podIPs": Strategy(key="ip"),
                "hostIPs": Strategy(key="ip"),
            }
        ),
    }
)
NAMESPACE = Strategy(
    fields={"metadata": METADATA, "status": Strategy(fields={"conditions": Strategy(key="type")})}
)
DEFAULT = Strategy(fields={"metadata": METADATA})


def strategic_merge(doc: Any, patch: Any, strategy: Strategy = DEFAULT) -> Any:
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object", malformed=True)
    return _smp_map(doc if isinstance(doc, dict) else {}, patch, strategy)


def _smp_map(doc: JSON, patch: JSON, strategy: Strategy) -> JSON:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    out = dict(doc)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    for k, v in patch.items():
        if k in ("$patch", "$retainKeys") or k.startswith("$setElementOrder/"):
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            name = k.split("/", 1)[1]
            if isinstance(out.get(name), list) and isinstance(v, list):
                out[name] = [x for x in out[name] if x not in v]
            continue
        sub = strategy.fields.get(k, Strategy())
        if v is None or (isinstance(v, dict) and v.get("$patch") == "delete"):
            out.pop(k, None)
        elif isinstance(v, dict):
            cur = out.get(k)
            out[k] = _smp_map(cur if isinstance(cur, dict) else {}, v, sub)
        elif isinstance(v, list) and isinstance(out.get(k), list):
            out[k] = _smp_list(out[k], v, sub)
        else:
            out[k] = _strip(v)
    return out


def _strip(value: Any) -> Any:
    """Drop directives from a value that is set as a whole."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value if not (isinstance(v, dict) and v.get("$patch") == "delete")]
    return copy.deepcopy(value)


def _smp_list(doc: list[Any], patch: list[Any], strategy: Strategy) -> list[Any]:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [_strip(p) for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")]
    if strategy.merge_primitives:
        return list(doc) + [_strip(p) for p in patch if p not in doc]
    key = strategy.key
    if key is None:
        return _strip(patch)  # type: ignore[no-any-return]
    out = list(doc)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"map: {item!r} does not contain declared merge key: {key}")
        pos = next(
            (i for i, cur in enumerate(out) if isinstance(cur, dict) and cur.get(key) == item[key]), None
        )
        if item.get("$patch") == "delete":
            if pos is not None:
                out.pop(pos)
        elif pos is None:
            out.append(_strip(item))
        else:
            out[pos] = _smp_map(out[pos], item, strategy)
    return out


def loads(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError as e:
        raise PatchError(f"invalid JSON in the patch: {e}", malformed=True) from e
