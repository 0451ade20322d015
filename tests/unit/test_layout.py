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


def test_the_public_surface_is_flat_and_loads_on_first_use() -> None:
    import ordo

    assert set(ordo.__all__) == {*ordo._WHERE, "__version__"}  # one list, kept whole
    for name in ordo.__all__:
        assert getattr(ordo, name) is not None, name
    assert {
        "GroupProducer",
        "OrderedProducer",
        "GatedConsumer",
        "AsyncConsumer",
        "RoundRobinPartitioner",
    } <= set(ordo.__all__)
    assert issubclass(ordo.ConfigError, ordo.OrdoError)
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        _ = ordo.Nothing
    # the pure models load no Kafka client (the operator imports them; so does `ordo crds`)
    probe = "import sys, ordo.api, ordo.epochs.history; print('confluent_kafka' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_the_harness_fixtures_come_as_a_pytest_plugin(tmp_path: Path) -> None:
    """Any pytest run where ordo-kafka-testbed is installed has the harness's fixtures (entry
    points pytest11), with no conftest.py importing them: here, a folder of one test only."""
    (tmp_path / "test_probe.py").write_text("def test_probe(kafka_testbed, kube_cluster): pass\n")
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--fixtures", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    for fixture in ("kafka_testbed", "kafka", "unique_topic", "kube_cluster", "kube", "pods"):
        assert f"\n{fixture} " in listed.stdout or f"\n{fixture}\n" in listed.stdout, fixture
    assert "from ordo_testbed.kafka.fixtures" in listed.stdout  # the plugin's modules, not a conftest
    assert "HypothesisSideeffectWarning" not in listed.stdout + listed.stderr  # loaded after hypothesis
    assert not (tmp_path / "conftest.py").exists()
