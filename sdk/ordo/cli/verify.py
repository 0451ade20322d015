"""``ordo verify --topic T``: the independent order/loss/duplicate verifier over what is in Kafka.

Reads the topic with read_committed and its history from the epoch log, and checks every key's
numbered records (see :mod:`ordo.verify` for the record formats it reads: the sandbox's
orders and the scenario's records ``{"k": key, "s": n}``, and the group member's ``{"p", "seq"}``).
With ``--source`` (a sandbox's SQLite database) it also checks that every order arrived.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..connection import BOOTSTRAP_ENV
from ..protocol import DEFAULT_EPOCH_TOPIC
from . import CliError
from .kafka_options import add_kafka_options, kafka_settings


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "verify",
        help="check a topic's records: per-key order across expansions, loss, duplicates",
        description="The independent verifier: reads the topic with read_committed and its history "
        "from the epoch log, and checks that each key's numbered records are in order across "
        "expansions, none twice and none missing. Exit code 0 only when they are.",
    )
    parser.add_argument("--topic", required=True, help="the topic to check")
    add_kafka_options(parser)
    parser.add_argument(
        "--epoch-topic", default=DEFAULT_EPOCH_TOPIC, help="the epoch log (default %(default)s)"
    )
    parser.add_argument("--source", type=Path, help="a sandbox's orders.db: every order must be there once")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds to read the topic to its end (default %(default)g)",
    )
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..verify import check_topic, read_epochs, read_topic, source_counts

    config = kafka_settings(args)
    if config is None:
        raise CliError(f"give --bootstrap (or set {BOOTSTRAP_ENV})")
    expected = None
    if args.source is not None:
        if not args.source.is_file():
            raise CliError(f"--source: no such file {args.source}")
        expected = source_counts(args.source)
    try:
        records, unreadable = read_topic(config, args.topic, args.timeout)
        epochs = read_epochs(config, args.topic, args.epoch_topic)
    except (LookupError, TimeoutError) as error:
        raise CliError(str(error)) from None
    except Exception as error:  # the Kafka client's errors: one line, not a traceback
        if type(error).__module__.startswith("confluent_kafka"):
            raise CliError(f"cannot read from Kafka at {config['bootstrap.servers']}: {error}") from None
        raise
    verdict = check_topic(args.topic, records, epochs, expected, unreadable)
    if args.json:
        print(json.dumps({**verdict.__dict__, "ok": verdict.ok}))
    else:
        print(verdict.summary())
        for example in verdict.examples:
            print(f"  {example}")
        print("OK" if verdict.ok else "FAILED")
    return 0 if verdict.ok else 1
