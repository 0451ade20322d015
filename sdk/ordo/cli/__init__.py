"""The ``ordo`` command. Each subcommand lives in its own module with a ``register`` function."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["CliError", "main"]


class CliError(Exception):
    """An error worth one clear line to the user, and a non-zero exit code."""


def build_parser() -> argparse.ArgumentParser:
    from . import bench, crds, sandbox, status, testbed, verify  # subcommands import CliError from here

    parser = argparse.ArgumentParser(
        prog="ordo",
        description="Kafka producer groups (KIP-509) and ordered topic expansion (KIP-253) on Kubernetes.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (sandbox, status, verify, crds, testbed, bench):
        module.register(commands)
    return parser


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
