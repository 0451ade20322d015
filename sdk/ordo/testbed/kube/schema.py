"""Structural OpenAPI v3 schemas of CRDs: pruning, defaulting and validation as the apiserver does.

Order on every write is prune -> default -> validate, like the real server's decode path. Error
causes carry the real server's wording, e.g. ``spec.partitions: Invalid value: 0: spec.partitions in
body should be greater than or equal to 1``. Not covered: ``format``, CEL ``x-kubernetes-validations``
and list-type uniqueness (``x-kubernetes-list-type``).
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from typing import Any

JSON = dict[str, Any]
Cause = dict[str, str]

_ROOT_KEEP = ("apiVersion", "kind", "metadata")


def prune(schema: JSON, value: Any, root: bool = True) -> None:
    """Drop, in place, fields the schema does not know (unless it preserves unknown fields)."""
    if isinstance(value, dict):
        props: JSON = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        keep_all = schema.get("x-kubernetes-preserve-unknown-fields") is True or addl is True
        embedded = root or schema.get("x-kubernetes-embedded-resource") is True
        for k in list(value):
            if embedded and k in _ROOT_KEEP:
                continue  # ObjectMeta is the server's business, whatever the schema says
            if k in props:
                prune(props[k], value[k], root=False)
            elif isinstance(addl, dict):
                prune(addl, value[k], root=False)
            elif not keep_all:
                del value[k]
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            prune(schema["items"], item, root=False)


def default(schema: JSON, value: Any) -> None:
    """Fill, in place, absent properties that have a ``default``; nulls of non-nullable fields
    are dropped first so they get the default too (the server does the same since 1.20)."""
    if isinstance(value, dict):
        props: JSON = schema.get("properties") or {}
        for k, sub in props.items():
            if k in value and value[k] is None and not sub.get("nullable"):
                del value[k]
            if k not in value and "default" in sub:
                value[k] = copy.deepcopy(sub["default"])
            if k in value:
                default(sub, value[k])
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            for k, v in value.items():
                if k not in props:
                    default(addl, v)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            default(schema["items"], item)


def render(value: Any) -> str:
    """A bad value as Go's field errors print it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, separators=(",", ":"))


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _has_type(value: Any, typ: str) -> bool:
    actual = _type_of(value)
    return actual == typ or (typ == "number" and actual == "integer")


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _invalid(path: str, value: Any, msg: str) -> Cause:
    return {"reason": "FieldValueInvalid", "message": f"Invalid value: {render(value)}: {msg}", "field": path}


def validate(schema: JSON, value: Any, path: str = "") -> list[Cause]:
    """Every violation of ``schema`` by ``value``; ``path`` is the field path (``spec.x[0].y``)."""
    name = path or "<root>"
    if value is None:
        if schema.get("nullable") or not (schema.get("type") or schema.get("x-kubernetes-int-or-string")):
            return []
        return [
            _invalid(path, "null", f'{name} in body must be of type {schema.get("type", "string")}: "null"')
        ]
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            msg = f'{name} in body must be of type integer,string: "{_type_of(value)}"'
            return [_invalid(path, _type_of(value), msg)]
    elif "type" in schema and not _has_type(value, schema["type"]):
        msg = f'{name} in body must be of type {schema["type"]}: "{_type_of(value)}"'
        return [_invalid(path, _type_of(value), msg)]

    errs: list[Cause] = []
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(render(v) for v in schema["enum"])
        errs.append(
            {
                "reason": "FieldValueNotSupported",
                "message": f"Unsupported value: {render(value)}: supported values: {supported}",
                "field": path,
            }
        )
    if isinstance(value, int | float) and not isinstance(value, bool):
        errs += _numeric(schema, value, path, name)
    elif isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errs.append(
                _invalid(path, value, f"{name} in body should be at least {schema['minLength']} chars long")
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errs.append(
                {
                    "reason": "FieldValueTooLong",
                    "message": f"Too long: may not be more than {schema['maxLength']} bytes",
                    "field": path,
                }
            )
        if "pattern" in schema and not _regex(schema["pattern"]).search(value):
            errs.append(_invalid(path, value, f"{name} in body should match '{schema['pattern']}'"))
    elif isinstance(value, list):
        errs += _array(schema, value, path, name)
    elif isinstance(value, dict):
        errs += _object(schema, value, path, name)
    errs += _combinators(schema, value, path, name)
    return errs


def _numeric(schema: JSON, value: float, path: str, name: str) -> list[Cause]:
    errs: list[Cause] = []
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if lo is not None:
        if schema.get("exclusiveMinimum") and value <= lo:
            errs.append(_invalid(path, value, f"{name} in body should be greater than {render(lo)}"))
        elif value < lo:
            errs.append(
                _invalid(path, value, f"{name} in body should be greater than or equal to {render(lo)}")
            )
    if hi is not None:
        if schema.get("exclusiveMaximum") and value >= hi:
            errs.append(_invalid(path, value, f"{name} in body should be less than {render(hi)}"))
        elif value > hi:
            errs.append(_invalid(path, value, f"{name} in body should be less than or equal to {render(hi)}"))
    step = schema.get("multipleOf")
    if step and (value / step) != int(value / step):
        errs.append(_invalid(path, value, f"{name} in body should be a multiple of {render(step)}"))
    return errs


def _array(schema: JSON, value: list[Any], path: str, name: str) -> list[Cause]:
    errs: list[Cause] = []
    if "minItems" in schema and len(value) < schema["minItems"]:
        errs.append(
            _invalid(path, len(value), f"{name} in body should have at least {schema['minItems']} items")
        )
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errs.append(
            {
                "reason": "FieldValueTooMany",
                "message": f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
                "field": path,
            }
        )
    if schema.get("uniqueItems"):
        seen = [json.dumps(v, sort_keys=True) for v in value]
        if len(set(seen)) != len(seen):
            errs.append(_invalid(path, value, f"{name} in body shouldn't contain duplicates"))
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            errs += validate(items, item, f"{path}[{i}]")
    return errs


def _object(schema: JSON, value: JSON, path: str, name: str) -> list[Cause]:
    errs: list[Cause] = []
    prefix = f"{path}." if path else ""
    for req in schema.get("required", []):
        if req not in value:
            errs.append({"reason": "FieldValueRequired", "message": "Required value", "field": prefix + req})
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        errs.append(
            _invalid(
                path, len(value), f"{name} in body should have at least {schema['minProperties']} properties"
            )
        )
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        errs.append(
            _invalid(
                path, len(value), f"{name} in body should have at most {schema['maxProperties']} properties"
            )
        )
    props: JSON = schema.get("properties") or {}
    addl = schema.get("additionalProperties")
    for k, v in value.items():
        if not path and k == "metadata":
            continue
        if k in props:
            errs += validate(props[k], v, prefix + k)
        elif isinstance(addl, dict):
            errs += validate(addl, v, prefix + k)
    return errs


def _combinators(schema: JSON, value: Any, path: str, name: str) -> list[Cause]:
    errs: list[Cause] = []
    for sub in schema.get("allOf", []):
        errs += validate(sub, value, path)
    if "anyOf" in schema and all(validate(s, value, path) for s in schema["anyOf"]):
        errs.append(_invalid(path, value, f"{name} in body must validate at least one schema (anyOf)"))
    if "oneOf" in schema and sum(not validate(s, value, path) for s in schema["oneOf"]) != 1:
        errs.append(_invalid(path, value, f"{name} in body must validate one and only one schema (oneOf)"))
    if "not" in schema and not validate(schema["not"], value, path):
        errs.append(_invalid(path, value, f"{name} in body must not validate the schema (not)"))
    return errs


def admit(schema: JSON, obj: JSON) -> list[Cause]:
    """Prune, default and validate ``obj`` in place; returns the validation errors."""
    if not schema:
        return []
    prune(schema, obj)
    default(schema, obj)
    return validate(schema, obj)
