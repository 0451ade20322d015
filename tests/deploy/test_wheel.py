"""The SDK's wheel holds the SDK and nothing else: no harness, no demo, no operator or Spark code,
and none of their dependencies; installed without extras into a fresh venv it is what a
consumer-only pod needs and nothing more (no Kubernetes client, rich or pyyaml), and what needs an
extra names it; each other distribution of the repository builds on its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from ordo.partitioners import murmur2_python, to_positive

ROOT = Path(__file__).resolve().parents[2]
VERSION = (ROOT / "VERSION").read_text().strip()
HARNESS_ONLY = ("kio", "aiohttp", "cryptography", "pytest", "kopf", "pyspark", "pyarrow", "pandas")
EXTRAS_ONLY = ("kubernetes", "rich", "pyyaml", "prometheus-client")


def _wheel(project: Path, out: Path) -> Path:
    """The wheel of ``project``, built from a copy (setuptools leaves build/ in what it builds)."""
    copy = out / "src"
    if project == ROOT:  # the SDK: what its pyproject.toml and setup.py name
        copy.mkdir()
        for name in ("pyproject.toml", "setup.py", "README.md", "VERSION", "LICENSE"):
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
    with zipfile.ZipFile(wheel) as archive:  # every distribution ships the repository's LICENSE
        (license_file,) = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(license_file) == (ROOT / "LICENSE").read_bytes()
    return wheel


def _requirements(metadata: str, extra: str | None = None) -> list[str]:
    """The wheel's requirements without extras, or those of ``extra``."""
    message = Parser().parsestr(metadata)
    every = message.get_all("Requires-Dist") or []
    if extra is None:
        return [r for r in every if "extra ==" not in r]
    return [r.split(";")[0] for r in every if f'extra == "{extra}"' in r]


def test_the_sdk_wheel_holds_only_the_sdk(tmp_path: Path) -> None:
    wheel = _wheel(ROOT, tmp_path)
    assert wheel.name.startswith(f"ordo_kafka-{VERSION}-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(f"{info}/METADATA").decode()
        scripts = archive.read(f"{info}/entry_points.txt").decode()
    tops = {n.split("/")[0] for n in names} - {info}
    assert tops == {"ordo"}, tops
    tools = ("ordo/cli/bench.py", "ordo/cli/eos_loop.py", "ordo/cli/eos_config.py")  # the harness's now
    for gone in ("ordo/testbed/", "ordo/sandbox/", "ordo/scenario/", *tools):
        assert not any(n.startswith(gone) for n in names), gone
    for kept in ("ordo/__init__.py", "ordo/gated_consumer.py", "ordo/verify/topic.py", "ordo/py.typed"):
        assert kept in names
    required = " ".join(_requirements(metadata)).lower()
    assert "confluent-kafka" in required and "pydantic" in required
    assert not [d for d in HARNESS_ONLY if d in required], required
    assert not [d for d in EXTRAS_ONLY if d in required], required
    assert "kubernetes" in " ".join(_requirements(metadata, "group"))
    assert {"kubernetes", "pyyaml", "rich"} <= {
        r.split(">")[0].split("<")[0] for r in _requirements(metadata, "cli")
    }
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
    assert wheel.name.startswith(f"{distribution}-{VERSION}-")
    with zipfile.ZipFile(wheel) as archive:
        tops = {n.split("/")[0] for n in archive.namelist() if ".dist-info" not in n}
        entry_points = "".join(
            archive.read(n).decode() for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")
        )
    assert package in tops and "ordo" not in tops
    if package == "ordo_testbed":  # the commands it adds to ordo's, bench eos among them
        assert "bench = ordo_testbed.bench:register" in entry_points, entry_points


# What a consumer-only pod runs, in a venv with the wheel and its dependencies only
_CONSUMER_POD = """
import importlib.util, json, logging
logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s %(message)s")
import ordo
from ordo import AsyncConsumer, GatedConsumer, OrderedProducer, RoundRobinPartitioner
from ordo.verify import KeyOrder
from ordo.partitioners import murmur2_partition
out = {
    "classes": [c.__name__ for c in (AsyncConsumer, GatedConsumer, OrderedProducer, KeyOrder)],
    "partition": murmur2_partition(b"customer-7", 12),
    "installed": [m for m in ("kubernetes", "rich", "yaml") if importlib.util.find_spec(m)],
}
try:
    from ordo import GroupProducer
except ImportError as error:
    out["group"] = str(error)
print(json.dumps(out))
"""


def test_without_extras_the_wheel_runs_consumers_and_names_the_extra_for_the_rest(tmp_path: Path) -> None:
    (tmp_path / "wheel").mkdir()
    wheel = _wheel(ROOT, tmp_path / "wheel")
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--disable-pip-version-check", str(wheel)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    ran = subprocess.run(
        [str(python), "-c", _CONSUMER_POD], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["classes"] == ["AsyncConsumer", "GatedConsumer", "OrderedProducer", "KeyOrder"]
    assert out["partition"] == to_positive(murmur2_python(b"customer-7")) % 12  # C there, Python here
    assert out["installed"] == [], "a consumer-only install pulled an extra's package"
    assert "pip install 'ordo-kafka[group]'" in out["group"], out
    # the wheel was built with a compiler: the accelerators are there, and the import says so
    assert f"DEBUG ordo ordo {VERSION}: C accelerators ordo._fastproduce, ordo._fastscan found" in ran.stderr

    ordo = venv / "bin" / "ordo"
    version = subprocess.run([str(ordo), "--version"], capture_output=True, text=True, timeout=60, env=env)
    assert version.stdout.splitlines() == [
        f"ordo {VERSION} (ordo-kafka)",
        "C accelerators: ordo._fastproduce loaded, ordo._fastscan loaded",
    ], version.stderr
    status = subprocess.run(
        [str(ordo), "status", "--kubeconfig", str(tmp_path / "none")], capture_output=True, text=True,
        timeout=60, env=env,
    )  # fmt: skip
    assert status.returncode == 1
    assert "pip install 'ordo-kafka[cli]'" in status.stderr and "Traceback" not in status.stderr, (
        status.stderr
    )
    # the harness's commands, its plugins, are not in the SDK: one line says what to install
    bench = subprocess.run(
        [str(ordo), "bench", "eos", "--testbed"], capture_output=True, text=True, timeout=60, env=env
    )
    assert bench.returncode == 1 and bench.stderr.count("\n") == 1, bench.stderr
    assert "ordo-kafka-testbed" in bench.stderr and "pip install -e ./testbed" in bench.stderr, bench.stderr
