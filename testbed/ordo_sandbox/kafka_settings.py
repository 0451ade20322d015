"""The sandbox's Kafka connection, handed whole to every process it starts.

``ordo sandbox --bootstrap`` takes ``-X key=value`` and ``--command-config FILE`` like the other
``ordo`` commands (:mod:`ordo.cli.kafka_options`); the librdkafka settings they make, credentials
among them, reach the sandbox's programs (its members, the workload's producers and consumers) as
a JSON file that only its owner can read (0600, in the work dir), named by ``--kafka-config FILE``:
never the settings themselves on a command line, which ``ps`` shows to everyone. The operator and
the Spark job, which read their Kafka from ``ORDO_KAFKA_*``, get them in the environment
(:func:`environment`).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["Kafka", "add_kafka_arguments", "environment", "read_settings", "settings_from", "settings_of",
           "write_settings"]  # fmt: skip

Kafka = str | Mapping[str, str]
"""A bootstrap alone (a plaintext Kafka, such as the testbed's), or the whole connection's
librdkafka settings (``bootstrap.servers`` among them)."""


def settings_of(kafka: Kafka) -> dict[str, str]:
    """librdkafka settings for ``kafka``."""
    return {"bootstrap.servers": kafka} if isinstance(kafka, str) else dict(kafka)


def write_settings(settings: Mapping[str, str], path: Path) -> Path:
    """Write ``settings`` to ``path`` as JSON, readable by its owner alone (also if it existed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # the mode os.open gives applies only to a file it creates
    with os.fdopen(fd, "w") as out:
        json.dump(dict(settings), out)
    return path


def read_settings(path: Path) -> dict[str, str]:
    """The settings :func:`write_settings` wrote; ValueError naming the file when they are not."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"--kafka-config {path}: {error}") from None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"--kafka-config {path}: expected a JSON object of librdkafka settings (strings)")
    return value


def add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    """A program's ``--bootstrap`` and ``--kafka-config``: one of them is needed."""
    parser.add_argument("--bootstrap", help="Kafka's bootstrap servers (over --kafka-config's)")
    parser.add_argument(
        "--kafka-config", type=Path, metavar="FILE",
        help="a JSON file of librdkafka settings (the sandbox writes one, mode 0600): the connection",
    )  # fmt: skip


def settings_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, str]:
    """The settings of ``--kafka-config`` with ``--bootstrap`` over them; a usage error without
    a bootstrap."""
    try:
        settings = read_settings(args.kafka_config) if args.kafka_config is not None else {}
    except ValueError as error:
        parser.error(str(error))
    if args.bootstrap:
        settings["bootstrap.servers"] = args.bootstrap
    if not settings.get("bootstrap.servers"):
        parser.error("give --bootstrap, or --kafka-config with bootstrap.servers")
    return settings


def environment(settings: Mapping[str, str]) -> dict[str, str]:
    """The ``ORDO_KAFKA_*`` variables the operator and the Spark apps read, for ``settings``."""
    options = {k: v for k, v in settings.items() if k != "bootstrap.servers"}
    env = {"ORDO_KAFKA_BOOTSTRAP": settings["bootstrap.servers"]}
    return {**env, "ORDO_KAFKA_OPTIONS": json.dumps(options)} if options else env
