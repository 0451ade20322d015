"""A ``helm install|upgrade|template`` command line as Helm reads it: release, chart, namespace and
the values its flags give, merged in Helm's order. Each ``--set``-like expression is parsed by
Helm's own strvals parser (helm-python-sdk binds it), so escaped dots, commas and ``{a,b}`` lists
mean what they mean to Helm."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python as helm

# Helm merges -f/--values files first, then these, each kind in the order given
# (helm.sh/helm pkg/cli/values: ValueFiles, JSONValues, Values, StringValues, FileValues, LiteralValues).
_PARSERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "--set-json": helm.parse_set_json,
    "--set": helm.parse_set_string,
    "--set-string": helm.parse_set_string_values,
    "--set-file": helm.parse_set_file,
    "--set-literal": helm.parse_set_literal,
}
_VALUE_FILES = {"-f", "--values"}
_WITH_VALUE = {"-n", "--namespace", "--version", "--timeout", "--description"}
_SWITCHES = {"--create-namespace", "--install", "--wait", "--atomic", "--debug", "--generate-name"}
ACTIONS = {"install", "upgrade", "template"}


@dataclass
class HelmRelease:
    action: str
    release: str
    chart: Path
    namespace: str = "default"
    values: dict[str, Any] = field(default_factory=dict)


def parse_helm(argv: list[str], cwd: Path) -> HelmRelease:
    """``argv`` (``helm install ...``) as Helm reads it; a flag it does not know raises ValueError
    (a documented flag this does not model must be taught here, not skipped)."""
    if len(argv) < 2 or argv[0] != "helm" or argv[1] not in ACTIONS:
        raise ValueError(f"not a helm {'|'.join(sorted(ACTIONS))} command: {argv}")
    action, words = argv[1], argv[2:]
    positional: list[str] = []
    files: list[str] = []
    expressions: dict[str, list[str]] = {flag: [] for flag in _PARSERS}
    namespace, generate_name = "default", False
    i = 0
    while i < len(words):
        word = words[i]
        flag, inline_value = word.split("=", 1) if word.startswith("--") and "=" in word else (word, None)
        takes_value = flag in _PARSERS or flag in _VALUE_FILES or flag in _WITH_VALUE
        if takes_value:
            if inline_value is None:
                if i + 1 >= len(words):
                    raise ValueError(f"helm: {flag} needs a value")
                i += 1
                inline_value = words[i]
            if flag in _PARSERS:
                expressions[flag].append(inline_value)  # a string array: one expression per flag
            elif flag in _VALUE_FILES:
                files.extend(inline_value.split(","))  # a string slice: commas separate files
            elif flag in {"-n", "--namespace"}:
                namespace = inline_value
        elif flag in _SWITCHES:
            generate_name = generate_name or flag == "--generate-name"
        elif word.startswith("-"):
            raise ValueError(f"helm: the test does not know the flag {word}; teach {__name__}")
        else:
            positional.append(word)
        i += 1
    wanted = 1 if generate_name else 2
    if len(positional) != wanted:
        raise ValueError(f"helm {action}: expected {wanted} arguments (release and chart), got {positional}")
    release = "generated" if generate_name else positional[0]
    values: dict[str, Any] = {}
    for name in files:
        if name == "-" or "://" in name:
            raise ValueError(f"helm: values from {name!r} cannot be checked offline")
        merge_into(values, helm.values_from_yaml((cwd / name).read_text()), f"-f {name}")
    for flag, parse in _PARSERS.items():
        for expression in expressions[flag]:
            merge_into(values, parse(expression), f"{flag} {expression}")
    return HelmRelease(action, release, cwd / positional[-1], namespace, values)


def merge_into(base: dict[str, Any], update: dict[str, Any], source: str) -> None:
    """Helm's merge of one parsed expression into the values so far: maps merge key by key, any
    other value replaces. Helm also updates a list element by index (``a[1]=x`` over an earlier
    ``a``); separate parses cannot reproduce that, so a list over a list raises instead of guessing."""
    for key, value in update.items():
        old = base.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            merge_into(old, value, source)
        elif isinstance(old, list) and isinstance(value, list):
            raise ValueError(f"{source}: a list over the list {key!r} of an earlier flag is not modelled")
        else:
            base[key] = value


def render(release: HelmRelease) -> dict[str, str]:
    """The release's manifests by Helm's engine; raises HelmValuesError when the values fail the
    chart's values.schema.json, as ``helm install`` does."""
    with helm.Chart.load(release.chart) as chart:
        return chart.render(
            release.values,
            name=release.release,
            namespace=release.namespace,
            is_install=release.action != "upgrade",
            is_upgrade=release.action == "upgrade",
        )
