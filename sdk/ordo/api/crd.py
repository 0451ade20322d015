"""Generate CustomResourceDefinitions from the pydantic models: the one source of truth.

Pydantic writes JSON Schema (2020-12 flavour); Kubernetes wants a *structural* OpenAPI v3 schema:
no $ref, every node typed, ``nullable`` instead of ``anyOf [X, null]``, no ``additionalProperties:
false`` (the API server prunes unknown fields instead), no ``title``/``const``/``propertyNames``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._extras import missing_extra
from .common import API_GROUP, VERSION, Resource

__all__ = ["crd_manifest", "render_crd", "structural_schema", "write_crds"]

JsonSchema = dict[str, Any]

_DROPPED = {"title", "propertyNames", "$defs", "discriminator"}


def structural_schema(schema: JsonSchema) -> JsonSchema:
    """Convert a pydantic JSON schema into a Kubernetes structural schema."""
    defs: dict[str, JsonSchema] = schema.get("$defs", {})

    def convert(node: JsonSchema) -> JsonSchema:
        node = dict(node)
        if "$ref" in node:
            target = defs[node.pop("$ref").rsplit("/", 1)[-1]]
            node = {**target, **node}  # siblings (description, default) override the definition's
        for key in ("anyOf", "oneOf"):
            if key in node:
                alternatives = node.pop(key)
                options = [o for o in alternatives if o.get("type") != "null"]
                nullable = len(options) < len(alternatives)
                if len(options) != 1:
                    raise ValueError(f"cannot express a union of {options} in a structural schema")
                node = {**convert(options[0]), **node}
                if nullable:
                    node["nullable"] = True
        if "allOf" in node:
            (only,) = node.pop("allOf")
            node = {**convert(only), **node}
        if "const" in node:
            node["enum"] = [node.pop("const")]
        if "exclusiveMinimum" in node and not isinstance(node["exclusiveMinimum"], bool):
            node["minimum"], node["exclusiveMinimum"] = node["exclusiveMinimum"], True
        if "exclusiveMaximum" in node and not isinstance(node["exclusiveMaximum"], bool):
            node["maximum"], node["exclusiveMaximum"] = node["exclusiveMaximum"], True
        if node.get("additionalProperties") is False or (
            "additionalProperties" in node and "properties" in node
        ):
            del node["additionalProperties"]
        if node.get("default", 0) is None:
            del node["default"]  # absent is the same as null for an optional field
        out: JsonSchema = {}
        for key, value in node.items():
            if key in _DROPPED:
                continue
            if key == "properties":
                out[key] = {name: convert(sub) for name, sub in value.items()}
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                out[key] = convert(value)
            else:
                out[key] = value
        if "enum" in out and "type" not in out:
            out["type"] = "string" if all(isinstance(v, str) for v in out["enum"]) else "integer"
        if "type" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
            raise ValueError(f"untyped node in structural schema: {out}")
        return out

    return convert(schema)


def _resource_schema(model: type[Resource]) -> JsonSchema:
    fields = model.model_fields
    spec_type = fields["spec"].annotation
    status_type = fields["status"].annotation
    spec = structural_schema(spec_type.model_json_schema(by_alias=True))  # type: ignore[union-attr]
    status_model = next(a for a in status_type.__args__ if a is not type(None))  # type: ignore[union-attr]
    status = structural_schema(status_model.model_json_schema(by_alias=True))
    schema: JsonSchema = {
        "type": "object",
        "description": (model.__doc__ or "").strip(),
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }
    if model.crd.validations:
        schema["x-kubernetes-validations"] = [v.as_schema() for v in model.crd.validations]
    return schema


def crd_manifest(model: type[Resource]) -> dict[str, Any]:
    """The CustomResourceDefinition object for a resource model."""
    info = model.crd
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": info.name, "labels": {"app.kubernetes.io/part-of": "ordo"}},
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": info.kind,
                "listKind": f"{info.kind}List",
                "plural": info.plural,
                "singular": info.singular,
                "shortNames": info.short_names,
                "categories": info.categories,
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {
                            "name": c.name,
                            "type": c.type,
                            "jsonPath": c.json_path,
                            **({"description": c.description} if c.description else {}),
                            **({"priority": c.priority} if c.priority else {}),
                        }
                        for c in info.printer_columns
                    ],
                    "schema": {"openAPIV3Schema": _resource_schema(model)},
                }
            ],
        },
    }


_HEADER = "# Generated from ordo.api by `ordo crds`: do not edit by hand.\n"


def render_crd(model: type[Resource]) -> str:
    try:
        import yaml
    except ModuleNotFoundError as error:
        raise missing_extra(error, "cli", "rendering the CRDs") from error
    return _HEADER + yaml.safe_dump(crd_manifest(model), sort_keys=False, width=100)


def crd_filename(model: type[Resource]) -> str:
    return f"{model.crd.name}.yaml"


def write_crds(directory: Path) -> list[Path]:
    """Write every CRD into ``directory``; returns the paths written."""
    from . import RESOURCES

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for model in RESOURCES:
        path = directory / crd_filename(model)
        path.write_text(render_crd(model))
        written.append(path)
    return written
