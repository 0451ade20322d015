"""The import contracts (``[tool.importlinter]`` in pyproject.toml) name modules one by one: these
tests keep the lists whole as the SDK grows, which import-linter itself does not check."""

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[2]
SDK = ROOT / "sdk" / "ordo"


def _contracts() -> list[dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _sdk_modules() -> set[str]:
    """ordo's top-level modules and packages that import-linter sees (Python source: the C
    accelerators ``_fastproduce`` and ``_fastscan`` are not in its graph)."""
    modules = {path.stem for path in SDK.glob("*.py") if path.stem != "__init__"}
    return modules | {path.name for path in SDK.iterdir() if (path / "__init__.py").exists()}


def test_every_sdk_module_sits_in_a_layer() -> None:
    (layers,) = [c for c in _contracts() if c["type"] == "layers" and c["containers"] == ["ordo"]]
    named = {name.strip() for layer in layers["layers"] for name in layer.replace(":", "|").split("|")}
    assert _sdk_modules() - named == set()
    assert named - _sdk_modules() == set()  # no layer names a module that is gone


def test_the_other_distributions_are_kept_out_of_every_private_sdk_module() -> None:
    (kept_out,) = [c for c in _contracts() if "benchmarks" in c.get("source_modules", ())]
    assert set(kept_out["source_modules"]) == {
        "ordo_operator", "ordo_spark", "ordo_testbed", "ordo_sandbox", "benchmarks",
    }  # fmt: skip
    private = {f"ordo.{name}" for name in _sdk_modules() if name.startswith("_")}
    assert set(kept_out["forbidden_modules"]) == private
