"""The SDK's wheel holds the SDK and nothing else: no harness, no demo, no operator or Spark code,
and none of their dependencies; each other distribution of the repository builds on its own."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HARNESS_ONLY = ("kio", "aiohttp", "cryptography", "pytest", "kopf", "pyspark", "pyarrow", "pandas")


def _wheel(project: Path, out: Path) -> Path:
    """The wheel of ``project``, built from a copy (setuptools leaves build/ in what it builds)."""
    copy = out / "src"
    if project == ROOT:  # the SDK: what its pyproject.toml and setup.py name
        copy.mkdir()
        for name in ("pyproject.toml", "setup.py", "README.md"):
            shutil.copy(ROOT / name, copy)
        shutil.copytree(ROOT / "sdk", copy / "sdk", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    else:
        shutil.copytree(project, copy, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    project = copy
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(out), str(project)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (wheel,) = out.glob("*.whl")
    return wheel


def _requirements(metadata: str) -> list[str]:
    message = Parser().parsestr(metadata)
    return [r for r in message.get_all("Requires-Dist") or [] if "extra ==" not in r]


def test_the_sdk_wheel_holds_only_the_sdk(tmp_path: Path) -> None:
    wheel = _wheel(ROOT, tmp_path)
    assert wheel.name.startswith("ordo_kafka-0.1.0-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(f"{info}/METADATA").decode()
        scripts = archive.read(f"{info}/entry_points.txt").decode()
    tops = {n.split("/")[0] for n in names} - {info}
    assert tops == {"ordo"}, tops
    for gone in ("ordo/testbed/", "ordo/sandbox/", "ordo/scenario/"):
        assert not any(n.startswith(gone) for n in names), gone
    for kept in ("ordo/__init__.py", "ordo/gated_consumer.py", "ordo/verify/topic.py", "ordo/py.typed"):
        assert kept in names
    required = " ".join(_requirements(metadata)).lower()
    assert "confluent-kafka" in required and "pydantic" in required
    assert not [d for d in HARNESS_ONLY if d in required], required
    assert "ordo = ordo.cli:main" in scripts


@pytest.mark.parametrize(
    ("folder", "distribution", "package"),
    [("operator", "ordo_kafka_operator", "ordo_operator"), ("spark_apps", "ordo_kafka_spark", "ordo_spark"),
     ("testbed", "ordo_kafka_testbed", "ordo_testbed")],
)  # fmt: skip
def test_the_other_distributions_build_on_their_own(
    folder: str, distribution: str, package: str, tmp_path: Path
) -> None:
    wheel = _wheel(ROOT / folder, tmp_path)
    assert wheel.name.startswith(f"{distribution}-0.1.0-")
    with zipfile.ZipFile(wheel) as archive:
        tops = {n.split("/")[0] for n in archive.namelist() if ".dist-info" not in n}
    assert package in tops and "ordo" not in tops
