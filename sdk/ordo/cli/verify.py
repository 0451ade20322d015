"""``ordo verify --topic T``: the independent order/loss/duplicate verifier over what is in Kafka.

Reads the topic with read_committed and its history from the epoch log, and checks every key's
numbered records. Where a record's key and number are, the options say
(:mod:`ordo.verify.records`): ``--key-field/--seq-field`` for JSON values, ``--seq-header``,
``--seq-field`` alone or ``--seq-offset`` with the Kafka record key, or ``--format NAME``, a format
another distribution names in the entry point group ``ordo.record_formats`` (ordo's test harness:
``ordo-testbed``, its scenarios' and the sandbox's records); without options, every such format.
Records it cannot read are counted and shown, with the options that would read them; a topic of
which it reads none is an error saying so, not a verdict. Other distributions' options may set
``expected``: key → how many numbers 0..n-1 the source holds, or a function returning that, called
when the command runs (the sandbox's ``--source``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any

from ..connection import BOOTSTRAP_ENV
from ..control_topics import DEFAULT_EPOCH_TOPIC
from ..verify.records import HOW_TO_POINT, AnyOf, JsonFields, KafkaKey, RecordLayout
from ..verify.topic import ReadProgress
from . import CliError
from .kafka_options import add_kafka_options, kafka_settings

FORMATS_GROUP = "ordo.record_formats"


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "verify",
        help="check a topic's records: per-key order across expansions, loss, duplicates",
        description="The independent verifier: reads the topic with read_committed and its history "
        "from the epoch log, and checks that each key's numbered records are in order across "
        "expansions, none twice and none missing. Exit code 0 only when they are. Say where a "
        "record's key and per-key number are: JSON values with --key-field and --seq-field; the "
        "Kafka record key with --seq-header (the number in a header), --seq-field (in the JSON "
        "value) or --seq-offset (no numbers: only that each key stays in one partition per epoch); "
        "or --format, a format an installed distribution names (without any: each of them).",
    )
    parser.add_argument("--topic", required=True, help="the topic to check")
    fields = parser.add_argument_group("where the key and the per-key number are")
    fields.add_argument("--key-field", metavar="FIELD", help="JSON values: the key's field (a.b: nested)")
    fields.add_argument(
        "--seq-field", metavar="FIELD",
        help="JSON values: the per-key number's field (alone: with the Kafka record key as the key)",
    )  # fmt: skip
    fields.add_argument(
        "--seq-header", metavar="NAME", help="the Kafka record key, and the number in this header"
    )
    fields.add_argument(
        "--seq-offset", action="store_true",
        help="the Kafka record key, no numbers: checks only that each key stays in one partition per epoch",
    )  # fmt: skip
    fields.add_argument(
        "--format", metavar="NAME",
        help=f"a named format of an installed distribution (entry points {FORMATS_GROUP}; now: "
        f"{', '.join(sorted(installed_formats())) or 'none'})",
    )  # fmt: skip
    add_kafka_options(parser)
    parser.add_argument(
        "--epoch-topic", default=DEFAULT_EPOCH_TOPIC, help="the epoch log (default %(default)s)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds to read the topic to its end (default %(default)g)",
    )
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.set_defaults(run=run, expected=None)


def installed_formats() -> dict[str, Callable[[], RecordLayout]]:
    """The record formats other distributions name: name → what loads its layout."""
    return {e.name: e.load for e in entry_points(group=FORMATS_GROUP)}


def layout_of(
    key_field: str | None,
    seq_field: str | None,
    seq_header: str | None,
    seq_offset: bool,
    format: str | None,
    formats: Mapping[str, Callable[[], RecordLayout]],
) -> RecordLayout:
    """The layout the options name; ``formats``: the installed ones (only those used are loaded)."""
    sources = [o for o, given in (("--seq-field", seq_field), ("--seq-header", seq_header),
                                  ("--seq-offset", seq_offset)) if given]  # fmt: skip
    if len(sources) > 1:
        raise CliError(f"give one of {', '.join(sources)}: each says where the per-key number is")
    if format is not None and (key_field or sources):
        raise CliError("--format names a whole format: give it alone, or the fields instead of it")
    if key_field is not None:
        if seq_field is None:
            raise CliError("--key-field needs --seq-field: the field of the key's number")
        return JsonFields(key_field, seq_field)
    if sources:
        return KafkaKey(seq_header=seq_header, seq_field=seq_field)
    if format is not None:
        if format not in formats:
            known = ", ".join(sorted(formats)) or "none is installed"
            raise CliError(f"--format {format}: no such record format ({known}); or {HOW_TO_POINT}")
        return formats[format]()
    if not formats:
        raise CliError(f"say where each record's key and per-key number are: {HOW_TO_POINT}")
    return AnyOf(tuple(formats[name]() for name in sorted(formats)))


def say_progress(progress: ReadProgress) -> None:
    """A line on stderr about once a second while a long read goes on (stdout stays the verdict's,
    JSON included)."""
    total = progress.offsets_to_read
    share = f" ({100 * progress.offsets / total:.0f}%)" if total else ""
    print(
        f"read {progress.records:,} records, {progress.offsets:,} of {total:,} offsets{share}",
        file=sys.stderr,
        flush=True,
    )


def run(args: argparse.Namespace) -> int:
    from ..verify import check_topic, read_epochs, read_topic, why_unreadable

    config = kafka_settings(args)
    if config is None:
        raise CliError(f"give --bootstrap (or set {BOOTSTRAP_ENV})")
    layout = layout_of(
        args.key_field, args.seq_field, args.seq_header, args.seq_offset, args.format, installed_formats()
    )
    expected = args.expected() if callable(args.expected) else args.expected  # before minutes of reading
    try:
        read = read_topic(config, args.topic, args.timeout, layout=layout, progress=say_progress)
        epochs = read_epochs(config, args.topic, args.epoch_topic)
    except (LookupError, TimeoutError) as error:
        raise CliError(str(error)) from None
    except Exception as error:  # the Kafka client's errors: one line, not a traceback
        if type(error).__module__.startswith("confluent_kafka"):
            raise CliError(f"cannot read from Kafka at {config['bootstrap.servers']}: {error}") from None
        raise
    if read.unreadable and not read.records:
        raise CliError(
            f"none of the {read.unreadable:,} records of {args.topic!r} is in a format it reads: "
            f"{why_unreadable(read.samples, layout)}"
        )
    verdict = check_topic(args.topic, read.records, epochs, expected, read.unreadable, layout.numbered)
    unreadable = why_unreadable(read.samples, layout) if read.unreadable else None
    if args.json:
        print(json.dumps({**verdict.__dict__, "ok": verdict.ok, "reads": layout.describe(),
                          "unreadable_records": unreadable}))  # fmt: skip
    else:
        print(f"reads {layout.describe()}")
        print(verdict.summary())
        for example in verdict.examples:
            print(f"  {example}")
        if unreadable is not None:
            print(f"  unreadable records: {unreadable}")
        print("OK" if verdict.ok else "FAILED")
    return 0 if verdict.ok else 1
