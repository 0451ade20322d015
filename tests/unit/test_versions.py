"""One version, in VERSION, for every distribution, the chart and the images; and a new one for
every change of a CRD or a wire format.

What crosses a process boundary between releases (the CRDs; the pod annotation and Lease
acknowledgement of a ProducerGroup; the epoch log's records and their header; the producer
registry's reports; the checkpoint records) is fingerprinted: its JSON schema, names and keys,
without the prose (descriptions, titles). ``wire_fingerprints.json`` next to this file holds the
fingerprints of each version. While CHANGELOG.md calls a version unreleased its entry may be
recorded again; once released it is frozen, and a change needs a new VERSION::

    .venv/bin/python tests/unit/test_versions.py --record   # writes the entry of VERSION
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).with_name("wire_fingerprints.json")
VERSION = (ROOT / "VERSION").read_text().strip()
DISTRIBUTIONS = ("ordo-kafka", "ordo-kafka-operator", "ordo-kafka-spark", "ordo-kafka-testbed")
# Records of what was, not instructions: they keep the tags of their day
_HISTORY = {"CHANGELOG.md", "docs/reliability.md"}
_IMAGE_TAG = re.compile(r"\b(ordo-operator|ordo-spark|ordo-app):(\d+\.\d+\.\d+)\b")
_PROSE = {"description", "title"}


def _without_prose(node: Any) -> Any:
    """``node`` without descriptions and titles (a property named so stays: its value is a dict)."""
    if isinstance(node, dict):
        return {k: _without_prose(v) for k, v in node.items() if not (k in _PROSE and isinstance(v, str))}
    if isinstance(node, list):
        return [_without_prose(v) for v in node]
    return node


def fingerprint(shape: Any) -> str:
    canonical = json.dumps(_without_prose(shape), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _schemas(model: type[BaseModel]) -> dict[str, Any]:
    """What a reader accepts and what a writer writes."""
    return {mode: model.model_json_schema(mode=mode) for mode in ("validation", "serialization")}


def wire_shapes() -> dict[str, Any]:
    """Each CRD and wire format, by name, as the code defines it now."""
    from ordo.api import RESOURCES
    from ordo.api.crd import crd_manifest
    from ordo.control_topics import DEFAULT_CHECKPOINT_TOPIC, DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC
    from ordo.epochs.history import EpochHistory
    from ordo.epochs.liveness import ProducerReport
    from ordo.epochs.stamp import EPOCH_HEADER, stamp
    from ordo.group.checkpoints import Checkpoint
    from ordo.member_wire import (
        ACK_ANNOTATION,
        ASSIGNMENT_ANNOTATION,
        GROUP_LABEL,
        MemberAssignment,
        checkpoint_key,
        lease_name,
        transactional_id,
    )

    shapes: dict[str, Any] = {f"crd {model.crd.name}": crd_manifest(model) for model in RESOURCES}
    shapes["pod annotation (assignment)"] = {
        "annotation": ASSIGNMENT_ANNOTATION, "label": GROUP_LABEL, "value": _schemas(MemberAssignment),
    }  # fmt: skip
    shapes["lease (acknowledgement)"] = {
        "annotation": ACK_ANNOTATION, "label": GROUP_LABEL, "name": lease_name("pod-0"),
    }  # fmt: skip
    shapes["epoch log record"] = {
        "topic": DEFAULT_EPOCH_TOPIC, "value": _schemas(EpochHistory), "header": EPOCH_HEADER,
        "stamp": [(name, value.decode()) for name, value in stamp(3)],
    }  # fmt: skip
    shapes["registry report"] = {"topic": DEFAULT_REGISTRY_TOPIC, "value": _schemas(ProducerReport)}
    shapes["checkpoint record"] = {
        "topic": DEFAULT_CHECKPOINT_TOPIC, "value": _schemas(Checkpoint),
        "key": checkpoint_key("ns", "group", 3), "transactional.id": transactional_id("ns", "group", 3),
    }  # fmt: skip
    return shapes


def fingerprints() -> dict[str, str]:
    return {name: fingerprint(shape) for name, shape in wire_shapes().items()}


def released(changelog: str) -> dict[str, bool]:
    """Each version CHANGELOG.md has a section for, and whether it is released."""
    return {
        m.group(1): m.group(2) is None
        for m in re.finditer(r"^## (\d+\.\d+\.\d+)( \(unreleased\))?\s*$", changelog, re.MULTILINE)
    }


def changes(recorded: Mapping[str, Mapping[str, str]], current: Mapping[str, str], version: str) -> list[str]:
    """What changed against ``version``'s recorded fingerprints: the names, each with its verdict."""
    entry = recorded.get(version, {})
    return sorted(
        f"{name}: {'new' if name not in entry else 'gone' if name not in current else 'changed'}"
        for name in {*entry, *current}
        if entry.get(name) != current.get(name)
    )


def advice(version: str, is_released: bool | None) -> str:
    if is_released:
        return (
            f"{version} is released: a change of a CRD or a wire format needs a new version. Raise "
            "VERSION (the minor for a change older readers refuse), add its section to CHANGELOG.md "
            "(what changed, the upgrade order, the compatibility table), then record it: "
            f"{sys.executable} tests/unit/test_versions.py --record"
        )
    return (
        f"{version} is unreleased: say what changed in CHANGELOG.md's {version} section (and the "
        f"upgrade order if it matters), then record it: .venv/bin/python tests/unit/test_versions.py --record"
    )


def test_every_distribution_the_chart_and_the_images_carry_VERSION() -> None:
    import ordo

    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION), VERSION
    assert ordo.__version__ == VERSION
    for distribution in DISTRIBUTIONS:  # installed from this checkout (make venv)
        assert importlib.metadata.version(distribution) == VERSION, distribution
    for distribution, pinned in (
        ("ordo-kafka-operator", {"ordo-kafka[group]"}),
        ("ordo-kafka-spark", {"ordo-kafka"}),
        ("ordo-kafka-testbed", {"ordo-kafka[cli,group]", "ordo-kafka-operator"}),
    ):
        requires = importlib.metadata.requires(distribution) or []
        ours = {r for r in requires if r.startswith("ordo-kafka")}
        assert ours == {f"{name}=={VERSION}" for name in pinned}, (distribution, ours)
    chart = yaml.safe_load((ROOT / "charts/ordo/Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (VERSION, VERSION)
    values = yaml.safe_load((ROOT / "charts/ordo/values.yaml").read_text())
    assert values["image"]["tag"] in ("", None), "the operator's image tag is the chart's appVersion"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    tags: dict[str, set[str]] = {}
    for name in tracked:
        path = ROOT / name
        if name in _HISTORY or path.is_symlink() or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for match in _IMAGE_TAG.finditer(text):
            tags.setdefault(match.group(0), set()).add(name)
    assert any(tag.startswith("ordo-operator:") for tag in tags), "no document names the operator's image"
    stale = {tag: sorted(files) for tag, files in tags.items() if not tag.endswith(f":{VERSION}")}
    assert not stale, f"image tags that are not VERSION {VERSION}: {stale}"


def test_crds_and_wire_formats_are_those_recorded_for_VERSION() -> None:
    recorded = json.loads(RECORDED.read_text())
    changelog = (ROOT / "CHANGELOG.md").read_text()
    found = changes(recorded, fingerprints(), VERSION)
    assert not found, f"{'; '.join(found)}. {advice(VERSION, released(changelog).get(VERSION))}"


def test_changelog_has_VERSION_its_upgrade_order_and_compatibility() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    versions = released(changelog)
    assert VERSION in versions, f"CHANGELOG.md has no section '## {VERSION}'"
    recorded = json.loads(RECORDED.read_text())
    assert set(recorded) <= set(versions), "a recorded version CHANGELOG.md does not describe"
    assert "## Upgrade order" in changelog
    minor = ".".join(VERSION.split(".")[:2])
    assert re.search(rf"^\| {re.escape(minor)}\.x \|", changelog, re.MULTILINE), (
        f"the compatibility table has no row for the operator {minor}.x"
    )


class _Assignment(BaseModel):
    group: str = Field(min_length=1, description="The group.")
    generation: int = Field(ge=0)


class _Reworded(BaseModel):
    group: str = Field(min_length=1, description="The ProducerGroup's name, reworded.")
    generation: int = Field(ge=0)


class _Grown(_Assignment):
    epoch: int = 0


class _Stricter(BaseModel):
    group: str = Field(min_length=1, description="The group.")
    generation: int = Field(ge=1)


@pytest.mark.parametrize(
    ("model", "same"),
    [(_Reworded, True), (_Grown, False), (_Stricter, False)],
    ids=["prose", "field", "bound"],
)
def test_a_fingerprint_sees_a_changed_field_or_bound_not_prose(model: type[BaseModel], same: bool) -> None:
    # the models' names differ too (their titles): only the schema's shape counts
    assert (fingerprint(_schemas(_Assignment)) == fingerprint(_schemas(model))) is same


def test_a_change_names_what_changed_and_what_to_do() -> None:
    recorded = {"0.2.0": {"a": "1", "b": "2"}}
    assert changes(recorded, {"a": "1", "b": "2"}, "0.2.0") == []
    assert changes(recorded, {"a": "1", "b": "3", "c": "4"}, "0.2.0") == ["b: changed", "c: new"]
    assert changes(recorded, {"a": "1"}, "0.2.0") == ["b: gone"]
    assert changes(recorded, {"a": "1", "b": "2"}, "0.3.0") == ["a: new", "b: new"]
    assert "needs a new version" in advice("0.2.0", True) and "Raise VERSION" in advice("0.2.0", True)
    assert "is unreleased" in advice("0.2.0", False) and "--record" in advice("0.2.0", False)
    text = "## Upgrade order\n\n## 0.3.0 (unreleased)\n\n- x\n\n## 0.2.0\n\n## 0.1.0\n"
    assert released(text) == {"0.3.0": False, "0.2.0": True, "0.1.0": True}


def record() -> int:
    """Writes VERSION's fingerprints, unless VERSION is released and they differ from its entry."""
    recorded: dict[str, dict[str, str]] = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    current = fingerprints()
    frozen = released((ROOT / "CHANGELOG.md").read_text()).get(VERSION) and VERSION in recorded
    if frozen and changes(recorded, current, VERSION):
        print(advice(VERSION, True), file=sys.stderr)
        return 1
    recorded[VERSION] = current
    RECORDED.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")
    print(f"recorded {len(current)} fingerprints for {VERSION} in {RECORDED.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit(__doc__)
    sys.exit(record())
