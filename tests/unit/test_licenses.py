"""Every distribution of the repository ships the repository's LICENSE and says its license the
PEP 639 way (an SPDX expression, license-files; no ``License ::`` classifier beside it), with a
setuptools that reads that form. The wheels' contents are tests/deploy/test_wheel.py's to build."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the SDK (the root) and the distributions that build from their own folders
DISTRIBUTIONS = (ROOT, ROOT / "operator", ROOT / "spark_apps", ROOT / "testbed")


@pytest.mark.parametrize("folder", DISTRIBUTIONS[1:], ids=lambda f: f.name)
def test_each_distribution_folder_has_the_repositorys_license(folder: Path) -> None:
    assert (folder / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()


@pytest.mark.parametrize("folder", DISTRIBUTIONS, ids=lambda f: f.name)
def test_each_distribution_declares_its_license_as_pep_639_says(folder: Path) -> None:
    pyproject = tomllib.loads((folder / "pyproject.toml").read_text())
    project = pyproject["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    assert not [c for c in project.get("classifiers", []) if c.startswith("License ::")]
    assert "Programming Language :: Python :: 3.11" in project["classifiers"]
    (setuptools,) = [r for r in pyproject["build-system"]["requires"] if r.startswith("setuptools")]
    floor = re.fullmatch(r"setuptools>=(\d+)", setuptools)
    assert floor is not None and int(floor.group(1)) >= 77, setuptools  # the first with PEP 639
