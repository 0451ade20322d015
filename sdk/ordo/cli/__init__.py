"""The ``ordo`` command. Each subcommand lives in its own module with a ``register`` function.

The SDK brings ``status``, ``verify``, ``crds`` and ``abort-fence``. Other distributions add
commands through the ``ordo.cli`` entry point group (a ``register(commands)`` function each, given
the argparse subparsers): ordo's test harness adds ``testbed``, ``sandbox`` and ``bench``. A plugin
that fails to load is one warning line naming it, and the other commands work; without the harness
its commands say in one line what to install.

Logging goes to stderr: ordo's warnings always, and with ``--verbose`` its debug messages and the
Kafka client's own lines (librdkafka, logger ``ordo.librdkafka``); without it those are left out and
an error that ends a command says what the client could not do.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterable, Sequence
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from .._extras import MissingExtraError

__all__ = ["CliError", "main", "version_text"]

DISTRIBUTION = "ordo-kafka"

PLUGINS_GROUP = "ordo.cli"
HARNESS_DISTRIBUTION = "ordo-kafka-testbed"

# Commands that come with the test harness, named here so that without it they say where to get it
_HARNESS_COMMANDS = {
    "bench": "benchmarks: KIP-609's exactly-once loop (eos) and the repository's",
    "sandbox": "the demo on an embedded Kafka and Kubernetes",
    "testbed": "a local Kafka and Kubernetes API server",
}


class CliError(Exception):
    """An error worth one clear line to the user, and a non-zero exit code."""


def build_parser() -> argparse.ArgumentParser:
    from . import abort_fence, crds, status, verify  # subcommands import CliError from here

    parser = argparse.ArgumentParser(
        prog="ordo",
        description="Kafka producer groups (KIP-509) and ordered topic expansion (KIP-253) on Kubernetes.",
    )
    parser.add_argument(
        "--version", action=_Version, help="show the version and whether the C accelerators serve, and exit"
    )
    parser.add_argument(
        "--verbose", "-v", action="store_true",
        help="also print debug messages and the Kafka client's own log lines (librdkafka)",
    )  # fmt: skip
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (status, verify, crds, abort_fence):
        module.register(commands)
    load_plugins(commands, entry_points(group=PLUGINS_GROUP))
    for name, what in _HARNESS_COMMANDS.items():
        if name not in commands.choices:
            missing = commands.add_parser(
                name, help=f"{what} (needs {HARNESS_DISTRIBUTION})", description=f"{what.capitalize()}: "
                f"comes with ordo's test harness, {HARNESS_DISTRIBUTION} (from a checkout of ordo: "
                "pip install -e ./testbed).",
            )  # fmt: skip
            missing.set_defaults(run=_needs_harness)
    return parser


def load_plugins(commands: Any, plugins: Iterable[EntryPoint]) -> list[str]:
    """Calls each plugin's ``register(commands)``, by name. One that fails (its import or its
    registration) is a warning line on stderr naming it and the other commands serve: a broken
    plugin must not take ``ordo`` down, nor vanish without a word. Returns the names loaded."""
    loaded: list[str] = []
    for plugin in sorted(plugins, key=lambda e: e.name):
        try:
            plugin.load()(commands)
        except Exception as error:  # whatever a plugin raises: it is reported, never silently lost
            where = f" from {plugin.dist.name}" if plugin.dist is not None else ""
            print(
                f"ordo: warning: command plugin {plugin.name} ({plugin.value}{where}) not loaded: "
                f"{type(error).__name__}: {error}",
                file=sys.stderr,
            )
        else:
            loaded.append(plugin.name)
    return loaded


def _needs_harness(args: Any) -> int:
    raise CliError(
        f"this command comes with ordo's test harness ({HARNESS_DISTRIBUTION}), which is not "
        "installed: from a checkout of ordo, `pip install -e ./testbed`"
    )


class _Version(argparse.Action):
    """``--version``: the distribution's version and whether each C accelerator serves here (a
    wheel built without a C compiler runs the pure-Python paths: correct, slower)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(version_text())  # on stdout, as argparse's own version action prints
        parser.exit()


def version_text() -> str:
    """What ``ordo --version`` prints: ``ordo 0.2.0 (ordo-kafka)`` and a line on the accelerators."""
    from .. import __version__
    from .._accelerators import accelerators

    serving = accelerators()
    state = ", ".join(f"{name} {'loaded' if ok else 'not loaded'}" for name, ok in serving.items())
    line = f"ordo {__version__} ({DISTRIBUTION})\nC accelerators: {state}"
    if not all(serving.values()):
        line += " (their pure-Python twins serve: correct, slower)"
    return line


class _StderrLogs(logging.StreamHandler):  # type: ignore[type-arg]
    """ordo's log records on stderr, each line prefixed with the command; librdkafka's own lines
    only when ``verbose``."""

    def __init__(self, command: str, verbose: bool) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter(f"ordo {command}: %(levelname)s %(name)s: %(message)s"))
        self.verbose = verbose

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.verbose and record.name.startswith("ordo.librdkafka"):
            return False
        return super().filter(record)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unread = parser.parse_known_args(argv)
    if unread and args.run is not _needs_harness:  # a missing command's own arguments are its to read
        parser.error(f"unrecognized arguments: {' '.join(unread)}")
    handler = _StderrLogs(args.command, args.verbose)
    root, ours = logging.getLogger(), logging.getLogger("ordo")
    levels = root.level, ours.level
    root.addHandler(handler)
    # other libraries' debug output (the Kubernetes client's logs response bodies) stays out
    root.setLevel(logging.INFO if args.verbose else logging.WARNING)
    ours.setLevel(logging.DEBUG if args.verbose else logging.NOTSET)
    try:
        result: int = args.run(args)
    except (CliError, MissingExtraError, ValueError, OSError) as error:
        print(f"ordo {args.command}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # the Kafka client's errors: one line, not a traceback
        if not type(error).__module__.startswith("confluent_kafka"):
            raise
        print(f"ordo {args.command}: {error}", file=sys.stderr)
        return 1
    finally:
        root.removeHandler(handler)
        root.setLevel(levels[0])
        ours.setLevel(levels[1])
    return result


if __name__ == "__main__":
    sys.exit(main())
