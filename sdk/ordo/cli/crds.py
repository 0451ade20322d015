"""``ordo crds``: write (or check) the CustomResourceDefinitions generated from ``ordo.api``."""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path
from typing import Any

from ..api import RESOURCES
from ..api.crd import crd_filename, render_crd, write_crds


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "crds",
        help="write the CRDs generated from the models",
        description="Writes the CustomResourceDefinitions of ProducerGroup and OrderedTopicExpansion, "
        "generated from the pydantic models in ordo.api, one file each; with --check, changes "
        "nothing and exits 1 if the files differ, showing how.",
    )
    parser.add_argument(
        "--output", "-o", type=Path, default=Path("crds"), help="directory (default: %(default)s)"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if the directory is out of date")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.check:
        for path in write_crds(args.output):
            print(path)
        return 0
    stale = 0
    for model in RESOURCES:
        path = args.output / crd_filename(model)
        wanted = render_crd(model)
        have = path.read_text() if path.exists() else ""
        if have != wanted:
            stale += 1
            print(
                "".join(
                    difflib.unified_diff(
                        have.splitlines(True), wanted.splitlines(True), str(path), "generated"
                    )
                )
            )
    if stale:
        print(f"{stale} CRD file(s) out of date: run `ordo crds`")
    return 1 if stale else 0
