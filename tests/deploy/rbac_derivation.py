"""Which Kubernetes permissions the operator's code uses, derived from the code itself.

Three sources, each read the way the running operator would exercise it:

- kopf handlers: the operator's own ``register_all`` is run against a fresh kopf registry, and every
  handler's resource is resolved (list+watch always; patch too where kopf stores progress or
  finalizers on the object: change handlers, daemons, timers).
- Kubernetes client calls: every ``kubernetes.client`` API method named in the operator's modules
  (and the ``ordo`` modules they import, test infrastructure aside) is looked up in the installed
  client's own endpoint table (HTTP method and path), giving group, resource, subresource and
  verb. ``CustomObjectsApi`` calls have their group and plural resolved from the arguments: module
  constants, or, for a wrapper's parameter, the arguments at the wrapper's call sites.
- kopf itself: Events (posting), CRD watching (scanning, cluster-wide only) and peering objects.

A call that cannot be resolved raises ``DerivationError`` naming the file and line, so the test
fails loudly rather than under-approximating.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import kopf
import kubernetes.client

ROOT = Path(__file__).resolve().parents[2]
SOURCE_ROOTS = {"ordo_operator": ROOT / "operator", "ordo": ROOT / "sdk"}
# Imported ordo modules that are test or demo infrastructure, not operator behaviour.
EXCLUDED_PREFIXES = ("ordo_testbed", "ordo_sandbox.scenario", "ordo.cli")


class DerivationError(Exception):
    pass


@dataclass(frozen=True, order=True)
class Permission:
    group: str  # "" for the core group
    resource: str  # plural, or plural/subresource
    verb: str

    def __str__(self) -> str:
        return f"{self.group or 'core'}:{self.resource}:{self.verb}"


@dataclass(frozen=True)
class Use:
    permission: Permission
    where: str  # file:line, or the kopf handler / framework feature


@dataclass(frozen=True)
class Endpoint:
    api_class: str
    http_method: str
    path: str


# --- the kubernetes client's endpoint table --------------------------------------------------

_SERIALIZE = re.compile(
    r"def _(?P<name>\w+)_serialize\(.*?method='(?P<method>[A-Z]+)',\s*resource_path='(?P<path>[^']+)'",
    re.S,
)


@cache
def client_endpoints() -> dict[str, tuple[Endpoint, ...]]:
    """Public API method name -> the endpoints of every API class that has a method of that name."""
    table: dict[str, list[Endpoint]] = {}
    api_dir = Path(importlib.import_module("kubernetes.client.api").__file__ or "").parent
    for path in sorted(api_dir.glob("*_api.py")):
        text = path.read_text()
        match = re.search(r"^class (\w+)", text, re.M)
        if match is None:
            continue
        for m in _SERIALIZE.finditer(text):
            endpoint = Endpoint(match.group(1), m.group("method"), m.group("path"))
            table.setdefault(m.group("name"), []).append(endpoint)
    if not table:
        raise DerivationError("could not read the kubernetes client's endpoint table")
    return {name: tuple(endpoints) for name, endpoints in table.items()}


def _endpoint_permission(endpoint: Endpoint, values: dict[str, str], watch: bool) -> list[Permission]:
    parts = endpoint.path.strip("/").split("/")
    if parts[0] == "api":  # /api/v1/...
        group, rest = "", parts[2:]
    else:  # /apis/{group}/{version}/...
        group, rest = parts[1], parts[3:]
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]  # namespaces/{namespace}/<resource>...
    if not rest:
        return []  # discovery (/api/v1, /apis/<group>/<version>): open to every authenticated user
    resource, named, sub = rest[0], len(rest) > 1, rest[2] if len(rest) > 2 else None
    group = values.get("group", group) if group == "{group}" else group
    resource = values.get("plural", resource) if resource == "{plural}" else resource
    if "{" in group or "{" in resource:
        raise DerivationError(f"unresolved {endpoint.path}")
    full = f"{resource}/{sub}" if sub else resource
    verbs = {
        ("GET", True): ["get"],
        ("GET", False): ["watch"] if watch else ["list"],  # a watch request needs only "watch"
        ("POST", False): ["create"],
        ("POST", True): ["create"],  # e.g. pods/eviction, pods/binding
        ("PUT", True): ["update"],
        ("PATCH", True): ["patch"],
        ("DELETE", True): ["delete"],
        ("DELETE", False): ["deletecollection"],
    }[(endpoint.http_method, named)]
    return [Permission(group, full, verb) for verb in verbs]


# --- which modules the operator runs ---------------------------------------------------------


def _module_file(name: str) -> Path | None:
    top = name.split(".")[0]
    root = SOURCE_ROOTS.get(top)
    if root is None or name.startswith(EXCLUDED_PREFIXES):
        return None
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _imports(tree: ast.Module, module: str, is_package: bool) -> Iterator[str]:
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def operator_modules() -> dict[str, Path]:
    """Every module of ordo_operator, plus the ordo modules they import (transitively)."""
    package = SOURCE_ROOTS["ordo_operator"] / "ordo_operator"
    return modules_from(
        ".".join(("ordo_operator", *path.relative_to(package).with_suffix("").parts)).removesuffix(
            ".__init__"
        )
        for path in package.rglob("*.py")
    )


def modules_from(start: Iterable[str]) -> dict[str, Path]:
    """These modules and the ordo modules they import, transitively (test infrastructure aside)."""
    found: dict[str, Path] = {}
    pending = list(start)
    while pending:
        name = pending.pop()
        if name in found:
            continue
        path = _module_file(name)
        if path is None:
            continue
        found[name] = path
        tree = ast.parse(path.read_text(), str(path))
        pending.extend(_imports(tree, name, path.name == "__init__.py"))
    return found


# --- Kubernetes client calls -----------------------------------------------------------------


@dataclass
class _Module:
    name: str
    path: Path
    tree: ast.Module
    parents: dict[ast.AST, ast.AST]

    @property
    def module(self) -> ModuleType:
        return importlib.import_module(self.name)

    def where(self, node: ast.AST) -> str:
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{getattr(node, 'lineno', '?')}"

    def enclosing_function(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        current: ast.AST | None = node
        while current is not None:
            current = self.parents.get(current)
            if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return current
        return None


def _parse(name: str, path: Path) -> _Module:
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    return _Module(name, path, tree, parents)


def _api_class_of(receiver: ast.expr, module: _Module, node: ast.AST) -> str | None:
    """The API class a method is called on: ``CoreV1Api(client).x`` or a name bound to one."""
    if isinstance(receiver, ast.Call):
        func = receiver.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name if name.endswith("Api") else None
    if isinstance(receiver, (ast.Name, ast.Attribute)):  # `api = CoreV1Api(…)`, `self._core = CoreV1Api(…)`
        scope: ast.AST | None = module.enclosing_function(node) if isinstance(receiver, ast.Name) else None
        target = ast.dump(receiver)
        for assign in ast.walk(scope or module.tree):
            if (
                isinstance(assign, ast.Assign)
                and any(ast.dump(t) == target for t in assign.targets)
                and isinstance(assign.value, ast.Call)
            ):
                return _api_class_of(assign.value, module, node)
    return None


def _call_arguments(call: ast.Call, params: list[str]) -> dict[str, ast.expr]:
    bound = dict(zip(params, call.args, strict=False))
    bound.update({kw.arg: kw.value for kw in call.keywords if kw.arg})
    return bound


def _values(expr: ast.expr, module: _Module, modules: list[_Module], depth: int = 0) -> set[str]:
    """The string values an argument expression can take."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return {expr.value}
    if isinstance(expr, ast.Name):
        function = module.enclosing_function(expr)
        params = [a.arg for a in function.args.args] if function else []
        if function is not None and expr.id in params and depth < 3:
            return _parameter_values(function, params.index(expr.id), expr.id, modules, depth + 1)
        value = getattr(module.module, expr.id, None)
        if isinstance(value, str):
            return {value}
    if isinstance(expr, ast.Attribute):
        value = eval(compile(ast.Expression(expr), "<arg>", "eval"), vars(module.module))  # module constant
        if isinstance(value, str):
            return {value}
    raise DerivationError(f"cannot resolve argument {ast.unparse(expr)!r} at {module.where(expr)}")


def _parameter_values(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    index: int,
    name: str,
    modules: list[_Module],
    depth: int,
) -> set[str]:
    """A wrapper's parameter: the values its callers pass (callers found by the function's name)."""
    values: set[str] = set()
    params = [a.arg for a in function.args.args]
    for module in modules:
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if called == function.name:
                argument = _call_arguments(node, params).get(name)
                if argument is not None:
                    values |= _values(argument, module, modules, depth)
    return values


def _method_parameters(api_class: str, method: str) -> list[str]:
    function = getattr(getattr(kubernetes.client, api_class), method)
    return [p for p in inspect.signature(function).parameters if p != "self"]


def client_calls(modules: dict[str, Path] | None = None) -> list[Use]:
    """Every Kubernetes API method the modules call (or hand to ``Watch().stream``)."""
    endpoints = client_endpoints()
    parsed = [_parse(name, path) for name, path in sorted((modules or operator_modules()).items())]
    uses: list[Use] = []
    for module in parsed:
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.Attribute) or node.attr not in endpoints:
                continue
            parent = module.parents.get(node)
            call = parent if isinstance(parent, ast.Call) and parent.func is node else None
            streamed = (
                isinstance(parent, ast.Call)
                and isinstance(parent.func, ast.Attribute)
                and parent.func.attr == "stream"
                and parent.args[:1] == [node]
            )
            if call is None and not streamed:
                continue  # a mention, not a use
            candidates = endpoints[node.attr]
            api_class = _api_class_of(node.value, module, node)
            if api_class is not None:
                candidates = tuple(e for e in candidates if e.api_class == api_class)
            classes = {e.api_class for e in candidates}
            if len(classes) != 1:
                raise DerivationError(
                    f"{module.where(node)}: {node.attr} exists in {sorted(classes)}; "
                    "call it on the API class directly (e.g. CoreV1Api(client).…) so its group is known"
                )
            (endpoint,) = candidates
            watch = streamed or (
                call is not None
                and any(
                    kw.arg == "watch" and isinstance(kw.value, ast.Constant) and kw.value.value
                    for kw in call.keywords
                )
            )
            combos: list[dict[str, str]] = [{}]
            if call is not None and "{" in endpoint.path.replace("{namespace}", "").replace("{name}", ""):
                arguments = _call_arguments(call, _method_parameters(endpoint.api_class, node.attr))
                for key in ("group", "plural"):
                    if f"{{{key}}}" in endpoint.path:
                        if key not in arguments:
                            raise DerivationError(f"{module.where(node)}: no {key} argument")
                        options = _values(arguments[key], module, parsed)
                        combos = [{**c, key: v} for c in combos for v in sorted(options)]
            for values in combos:
                for permission in _endpoint_permission(endpoint, values, watch):
                    uses.append(Use(permission, module.where(node)))
    return uses


# --- kopf handlers and kopf itself -----------------------------------------------------------


@cache
def _core_and_crd_resources() -> dict[str, tuple[str, str]]:
    """Resource names kopf selectors may use (plural, singular, kind, short names) -> (group, plural)."""
    names: dict[str, tuple[str, str]] = {}
    for endpoints in client_endpoints().values():
        for endpoint in endpoints:
            parts = endpoint.path.strip("/").split("/")
            if len(parts) < 3:
                continue  # discovery, not a resource
            group = "" if parts[0] == "api" else parts[1]
            rest = parts[2:] if parts[0] == "api" else parts[3:]
            if rest[:1] == ["namespaces"] and len(rest) > 2:
                rest = rest[2:]
            if rest and "{" not in rest[0] and "{" not in group:
                names.setdefault(rest[0], (group, rest[0]))
    import yaml

    for path in sorted((ROOT / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        spec = crd["spec"]
        for name in (
            spec["names"]["plural"],
            spec["names"]["singular"],
            spec["names"]["kind"],
            *spec["names"].get("shortNames", []),
        ):
            names[name] = (spec["group"], spec["names"]["plural"])
    return names


def _selector_resource(selector: Any) -> tuple[str, str]:
    names = _core_and_crd_resources()
    wanted = selector.plural or selector.kind or selector.singular or selector.shortcut or selector.any_name
    group = selector.group
    if group is None and selector.version == "v1":
        group = ""  # kopf.on.event("v1", "pods") style: the core group
    for name in (wanted, str(wanted).lower()):
        if name in names:
            known_group, plural = names[name]
            if group is None or group == known_group:
                return known_group, plural
    if group is not None and selector.plural:
        return group, selector.plural
    raise DerivationError(f"cannot resolve kopf selector {selector!r} to a resource")


def kopf_handler_uses() -> list[Use]:
    """Register the operator's handlers into a fresh kopf registry and list what they watch."""
    from ordo_operator.config import OperatorConfig
    from ordo_operator.startup import register_all

    registry = kopf.OperatorRegistry()
    previous = kopf.get_default_registry()
    kopf.set_default_registry(registry)
    try:
        register_all(OperatorConfig())
    finally:
        kopf.set_default_registry(previous)
    uses: list[Use] = []
    # kopf's registry keeps handlers per kind of reaction (private names, stable across kopf 1.x).
    kinds = {
        "_changing": ("list", "watch", "patch"),  # progress annotations, finalizers
        "_spawning": ("list", "watch", "patch"),  # daemons and timers put a finalizer on the object
        "_watching": ("list", "watch"),
        "_indexing": ("list", "watch"),
    }
    for attribute, verbs in kinds.items():
        for handler in getattr(registry, attribute).get_all_handlers():
            group, plural = _selector_resource(handler.selector)
            for verb in verbs:
                uses.append(Use(Permission(group, plural, verb), f"kopf handler {handler.id}"))
    if registry._webhooks.get_all_handlers():
        raise DerivationError("admission webhooks are registered: extend the RBAC derivation for them")
    return uses


def kopf_framework_uses(*, clusterwide: bool, peering: bool, scanning: bool) -> list[Use]:
    """What kopf itself calls, by how the chart runs it (see kopf._core.reactor.observation)."""
    uses = [Use(Permission("", "events", "create"), "kopf posting (kopf.event, handler log lines)")]
    if scanning and clusterwide:
        uses += [
            Use(Permission("apiextensions.k8s.io", "customresourcedefinitions", v), "kopf resource scanning")
            for v in ("list", "watch")
        ]
    if scanning and not clusterwide:
        uses += [Use(Permission("", "namespaces", v), "kopf namespace scanning") for v in ("list", "watch")]
    if peering:
        plural = "clusterkopfpeerings" if clusterwide else "kopfpeerings"
        uses += [Use(Permission("kopf.dev", plural, v), "kopf peering") for v in ("list", "watch", "patch")]
    return uses


def operator_uses(*, clusterwide: bool, peering: bool, scanning: bool) -> list[Use]:
    # The operator lists kopf's peering objects itself (ordo_operator.replicas: which replica
    # works) only when it runs with peering, and only the kind kopf's own peering lists.
    calls = [use for use in client_calls() if use.permission.group != "kopf.dev" or peering]
    own = {"clusterkopfpeerings" if clusterwide else "kopfpeerings"}
    calls = [use for use in calls if use.permission.group != "kopf.dev" or use.permission.resource in own]
    return [
        *calls,
        *kopf_handler_uses(),
        *kopf_framework_uses(clusterwide=clusterwide, peering=peering, scanning=scanning),
    ]


def granted(rules: Iterable[dict[str, Any]]) -> set[Permission]:
    """The permissions of RBAC PolicyRules (no wildcards allowed: they would defeat the check)."""
    out: set[Permission] = set()
    for rule in rules:
        for field in ("apiGroups", "resources", "verbs"):
            if "*" in rule.get(field, []):
                raise DerivationError(f"wildcard {field} in {rule}")
        if rule.get("resourceNames") or rule.get("nonResourceURLs"):
            raise DerivationError(f"unexpected resourceNames/nonResourceURLs in {rule}")
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    out.add(Permission(group, resource, verb))
    return out


if __name__ == "__main__":  # a readable dump for humans: python tests/deploy/rbac_derivation.py
    for use in sorted(operator_uses(clusterwide=True, peering=True, scanning=True), key=str):
        print(f"{use.permission!s:60} {use.where}", file=sys.stdout)
