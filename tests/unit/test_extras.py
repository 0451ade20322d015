"""A consumer-only install (``pip install ordo-kafka``, no extras): what needs an extra says which
one when it is missing, and ``import ordo`` and ``ordo --version`` say whether the C accelerators
serve. Each case runs in a fresh interpreter where the missing packages are made unimportable
(``sys.modules[name] = None``), as if their extra were not installed; tests/deploy/test_wheel.py
installs the real wheel without extras into a fresh venv."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _run(program: str, *, hide: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    hiding = "".join(f"sys.modules[{name!r}] = None\n" for name in hide)
    return subprocess.run(
        [sys.executable, "-c", f"import sys\n{hiding}{program}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_group_producer_without_the_group_extra_names_it() -> None:
    done = _run(
        "from ordo import GatedConsumer, OrderedProducer, AsyncConsumer\n"  # no extra needed
        "try:\n"
        "    from ordo import GroupProducer\n"
        "except ImportError as error:\n"
        "    print(error)\n"
        "else:\n"
        "    print('imported')\n",
        hide=("kubernetes",),
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'ordo-kafka[group]'" in done.stdout and "kubernetes" in done.stdout, done.stdout


def test_with_the_extra_group_producer_imports() -> None:
    done = _run("from ordo import GroupProducer; import ordo.group; print(GroupProducer.__name__)")
    assert done.stdout.strip() == "GroupProducer", done.stderr


def test_a_broken_kubernetes_install_is_not_blamed_on_the_extra() -> None:
    """Only the extra's own module missing means "install the extra"; a module missing inside it
    is the installation's own problem, and its error stays as it is."""
    done = _run(
        "from ordo._extras import require_extra\n"
        "try:\n"
        "    require_extra('kubernetes', 'group', 'x')\n"
        "except ImportError as error:\n"
        "    print(type(error).__name__, error.name)\n",
        hide=("urllib3",),
    )
    assert done.stdout.split() == ["ModuleNotFoundError", "urllib3"], (done.stdout, done.stderr)


@pytest.mark.parametrize(
    ("argv", "hide"),
    [
        (["status", "--kubeconfig", "/nonexistent"], ("rich",)),
        (["status", "--json", "--kubeconfig", "/dev/null"], ("kubernetes",)),
        (["crds", "--check"], ("yaml",)),
    ],
)
def test_commands_without_the_cli_extra_say_one_line_naming_it(
    argv: list[str], hide: tuple[str, ...]
) -> None:
    done = _run(f"from ordo.cli import main\nsys.exit(main({argv!r}))", hide=hide)
    assert done.returncode == 1, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"ordo {argv[0]}: ") and "pip install 'ordo-kafka[cli]'" in line, line


def test_ordo_version_says_the_accelerators_serve() -> None:
    done = _run("from ordo.cli import main\nmain(['--version'])")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == "C accelerators: ordo._fastproduce loaded, ordo._fastscan loaded"


def test_without_accelerators_import_logs_it_and_version_says_so() -> None:
    program = (
        "import logging\n"
        "logging.basicConfig(level=logging.DEBUG, format='%(levelname)s %(name)s %(message)s')\n"
        "import ordo\n"
        "print(ordo.accelerators())\n"
        "from ordo.cli import main\n"
        "main(['--version'])\n"
    )
    done = _run(program, hide=("ordo._fastproduce", "ordo._fastscan"))
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if "accelerator" in x]
    assert line.startswith("INFO ordo ") and "ordo._fastproduce, ordo._fastscan not built" in line
    assert "{'ordo._fastproduce': False, 'ordo._fastscan': False}" in done.stdout
    assert "C accelerators: ordo._fastproduce not loaded, ordo._fastscan not loaded" in done.stdout
    assert "pure-Python twins serve" in done.stdout


def test_with_accelerators_import_logs_at_debug_only() -> None:
    done = _run(
        "import logging\n"
        "logging.basicConfig(level=logging.DEBUG, format='%(levelname)s %(name)s %(message)s')\n"
        "import ordo\n"
    )
    (line,) = [x for x in done.stderr.splitlines() if "accelerator" in x]
    version = (Path(__file__).parents[2] / "VERSION").read_text().strip()
    assert line == f"DEBUG ordo ordo {version}: C accelerators ordo._fastproduce, ordo._fastscan found"
