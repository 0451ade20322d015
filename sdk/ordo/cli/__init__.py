"""The ``ordo`` command. Each subcommand lives in its own module with a ``register`` function.

The SDK brings ``status``, ``verify``, ``crds`` and ``bench eos``. Other distributions add
commands through the ``ordo.cli`` entry point group (a ``register(commands)`` function each):
ordo's test harness adds ``testbed`` and ``sandbox`` (and ``bench all|<name>`` in a checkout).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Any

__all__ = ["CliError", "main"]

# Commands that come with the test harness, named here so that without it they say where to get it
_HARNESS_COMMANDS = {
    "sandbox": "the demo on an embedded Kafka and Kubernetes",
    "testbed": "a local Kafka and Kubernetes API server",
}


class CliError(Exception):
    """An error worth one clear line to the user, and a non-zero exit code."""


def build_parser() -> argparse.ArgumentParser:
    from . import bench, crds, status, verify  # subcommands import CliError from here

    parser = argparse.ArgumentParser(
        prog="ordo",
        description="Kafka producer groups (KIP-509) and ordered topic expansion (KIP-253) on Kubernetes.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (status, verify, crds, bench):
        module.register(commands)
    for plugin in sorted(entry_points(group="ordo.cli"), key=lambda e: e.name):
        plugin.load()(commands)
    for name, what in _HARNESS_COMMANDS.items():
        if name not in commands.choices:
            missing = commands.add_parser(name, help=f"{what} (needs ordo's test harness)")
            missing.set_defaults(run=_needs_harness)
    return parser


def _needs_harness(args: Any) -> int:
    raise CliError(
        "this command comes with ordo's test harness, which is not installed: from a checkout of "
        f"ordo, `make {args.command}` or `pip install -e testbed`"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.run(args)
    except (CliError, ValueError, OSError) as error:
        print(f"ordo {args.command}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
