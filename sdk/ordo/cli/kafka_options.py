"""The Kafka options every ``ordo`` command that reaches Kafka takes, as kcat and Kafka's tools take
them: ``--bootstrap`` (default ``$ORDO_KAFKA_BOOTSTRAP``), ``-X key=value`` (repeatable) and
``--command-config FILE`` (a properties file; ``-X`` over it). :mod:`ordo.connection` reads them."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from ..connection import BOOTSTRAP_ENV, InvalidConnectionError, bootstrap_from_env, command_config, x_options
from . import CliError

__all__ = ["add_client_options", "add_kafka_options", "bootstrap_of", "client_options", "kafka_settings"]


def add_kafka_options(
    parser: argparse.ArgumentParser, purpose: str = "Kafka bootstrap servers", aliases: tuple[str, ...] = ()
) -> None:
    """``--bootstrap`` (and ``aliases``), ``-X`` and ``--command-config`` on ``parser``."""
    parser.add_argument(
        "--bootstrap",
        "--bootstrap-server",  # Kafka's tools' name
        *aliases,
        dest="bootstrap",
        default=None,
        help=f"{purpose} (default: ${BOOTSTRAP_ENV})",
    )
    add_client_options(parser)


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """``-X`` and ``--command-config`` alone, for a command whose ``--bootstrap`` is its own
    (``ordo sandbox``: without one it runs its own Kafka); :func:`client_options` reads them."""
    parser.add_argument(
        "-X",
        dest="kafka_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a librdkafka setting, e.g. -X security.protocol=SASL_SSL (repeatable; over --command-config)",
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="a properties file of client settings, as Kafka's tools take (librdkafka names; Java's "
        "sasl.jaas.config and a PEM ssl.truststore.location are translated)",
    )


def client_options(args: argparse.Namespace) -> dict[str, str]:
    """The settings of ``--command-config`` with ``-X`` over them."""
    options: dict[str, str] = {}
    try:
        if args.command_config is not None:
            try:
                text = args.command_config.read_text()
            except OSError as error:
                where = f"--command-config: cannot read {args.command_config}"
                raise CliError(f"{where}: {error.strerror}") from None
            options.update(command_config(text, str(args.command_config)))
        options.update(x_options(args.kafka_options))
    except InvalidConnectionError as error:
        raise CliError(str(error)) from None
    return options


def bootstrap_of(args: argparse.Namespace, options: dict[str, str]) -> str | None:
    """``--bootstrap``, else a ``bootstrap.servers`` among the options, else the environment."""
    if args.bootstrap:
        return str(args.bootstrap)
    if options.get("bootstrap.servers"):
        return options["bootstrap.servers"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from_env = bootstrap_from_env()
    for warning in caught:  # one line on stderr, not Python's warning format
        print(f"ordo: {warning.message}", file=sys.stderr)
    return from_env


def kafka_settings(args: argparse.Namespace) -> dict[str, str] | None:
    """librdkafka settings from the options, or None when no bootstrap is given anywhere."""
    options = client_options(args)
    bootstrap = bootstrap_of(args, options)
    return {**options, "bootstrap.servers": bootstrap} if bootstrap else None
