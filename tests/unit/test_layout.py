"""The project's shape: packaging, import names and the console script."""

import importlib
import operator
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ordo.cli import main as ordo

ROOT = Path(__file__).parents[2]


def test_stdlib_operator_is_not_shadowed() -> None:
    assert Path(operator.__file__).is_relative_to(sysconfig.get_paths()["stdlib"])
    assert not (ROOT / "operator" / "__init__.py").exists()


def test_the_three_import_packages_come_from_their_folders() -> None:
    for name, folder in (("ordo", "sdk"), ("ordo_operator", "operator"), ("ordo_spark", "spark_apps")):
        module = importlib.import_module(name)
        assert Path(module.__file__ or "").resolve().is_relative_to(ROOT / folder)


def test_console_script_help() -> None:
    result = subprocess.run([sys.executable, "-m", "ordo.cli", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "crds" in result.stdout


def test_cli_errors_are_one_line_and_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert ordo(["crds", "--output", str(blocker / "sub")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ordo crds: ") and err.count("\n") == 1
