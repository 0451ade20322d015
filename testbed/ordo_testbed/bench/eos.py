"""``ordo bench eos``: a consume-transform-produce exactly-once benchmark, as KIP-609 proposes.

Fills the input topic with ``--records`` records, then consumes them, writes one output record per
input record and commits the consumer's offsets in the same transaction, ``--transaction-size``
records per transaction. With ``--pre-registration`` each transaction declares the output
partitions of its records (all of them when a record has no key) and the consumer group up front
(``OrderedProducer.transaction``). At the end a read_committed consumer checks that the output
holds every input record exactly once. The clients take their settings as Kafka's perf tools do:
``--producer-config``/``--consumer-config`` files, ``--producer-props``/``--consumer-props`` over
them (:mod:`ordo_testbed.bench.eos_config`), and the ``-X``/``--command-config`` every ``ordo``
command takes (:mod:`ordo.connection`) under both; ``--transactional-id`` and a ``--throughput``
cap as KIP-609 lists. ``--testbed`` runs it on a local broker of the harness.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ordo.cli import CliError
from ordo.cli.kafka_options import add_kafka_options, bootstrap_of, client_options
from ordo.client_config import logged
from ordo.connection import BOOTSTRAP_ENV, InvalidConnectionError, parse_properties, x_options

from .eos_config import EosConfigError, EosConfigs, eos_configs

__all__ = [
    "EosResult",
    "check_output",
    "client_configs",
    "measure",
    "percentile",
    "register",
    "run",
    "tally",
]


def register(kinds: Any) -> None:
    """``eos`` on ``ordo bench``'s subparsers."""
    eos: argparse.ArgumentParser = kinds.add_parser(
        "eos",
        help="consume-transform-produce with exactly-once transactions (KIP-609)",
        description="A consume-transform-produce exactly-once benchmark, as KIP-609 proposes: fills "
        "the input topic with --records records, then consumes them and writes one output record per "
        "input record, committing the consumer's offsets in the same transaction, --transaction-size "
        "records per transaction; with --pre-registration each transaction declares its output "
        "partitions and consumer group up front. A read_committed consumer then checks that the "
        "output holds every input record exactly once.",
    )
    # --bootstrap-servers: the name it had first, still accepted
    add_kafka_options(
        eos, "Kafka bootstrap servers (--testbed starts a local one instead)", ("--bootstrap-servers",)
    )
    eos.add_argument("--testbed", action="store_true", help="run against an embedded Kafka testbed")
    eos.add_argument("--input-topic", help="consume from this topic (default: a new one)")
    eos.add_argument("--output-topic", help="produce to this topic (default: a new one)")
    eos.add_argument(
        "--partitions",
        type=int,
        default=6,
        help="partitions of topics this command creates (default %(default)s)",
    )
    eos.add_argument(
        "--consumer-group-id", default="ordo-eos-bench", help="the consumer group (default %(default)s)"
    )
    eos.add_argument(
        "--poll-timeout", type=int, default=100, help="consumer poll timeout, ms (default %(default)s)"
    )
    eos.add_argument(
        "--transaction-size", type=int, default=500, help="records per transaction (default %(default)s)"
    )
    eos.add_argument(
        "--pre-registration",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="declare each transaction's output partitions and group when it begins (KIP-609; default: off)",
    )
    eos.add_argument(
        "--records", type=int, default=100_000, help="input records to process (default %(default)s)"
    )
    eos.add_argument(
        "--transactional-id",
        help="the producer's transactional.id (default: from the producer config, else ordo-eos-bench-<run>)",
    )
    eos.add_argument(
        "--throughput",
        type=float,
        default=-1,
        help="cap on records processed per second (default %(default)g: no cap)",
    )
    eos.add_argument(
        "--producer-config", type=Path, help="a properties file of librdkafka settings for the producers"
    )
    eos.add_argument(
        "--consumer-config", type=Path, help="a properties file of librdkafka settings for the consumers"
    )
    eos.add_argument(
        "--producer-props", nargs="+", default=[], metavar="KEY=VALUE",
        help="producer settings, over --producer-config (e.g. security.protocol=SASL_SSL)",
    )  # fmt: skip
    eos.add_argument(
        "--consumer-props", nargs="+", default=[], metavar="KEY=VALUE",
        help="consumer settings, over --consumer-config",
    )  # fmt: skip
    eos.add_argument(
        "--record-size", type=int, default=100, help="bytes per record value (default %(default)s)"
    )
    eos.set_defaults(run=run)


@dataclass
class EosResult:
    records: int
    seconds: float
    transactions: int
    commit_latencies: list[float]
    duplicates: int = 0
    missing: int = 0
    extra: list[str] = field(default_factory=list)

    @property
    def exactly_once(self) -> bool:
        return self.duplicates == 0 and self.missing == 0


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0..1) of ``values``; NaN when there are none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def tally(run_id: str, records: int, values: Iterable[bytes]) -> tuple[int, int]:
    """(duplicates, missing) of this run's record numbers 0..records-1 among output ``values``."""
    prefix = f"{run_id}:".encode()
    seen: Counter[int] = Counter()
    for value in values:
        if value.startswith(prefix):
            seen[int(value[len(prefix) :].split(b":", 1)[0])] += 1
    duplicates = sum(n - 1 for n in seen.values() if n > 1)
    missing = sum(1 for i in range(records) if i not in seen)
    return duplicates, missing


def run(args: argparse.Namespace) -> int:
    _check(args)
    run_id = uuid.uuid4().hex[:8]
    if args.testbed:
        with _local_kafka() as local:
            return _report(args, measure(args, client_configs(args, local, run_id), run_id))
    given = bootstrap_of(args, client_options(args))
    try:
        configs = client_configs(args, given, run_id)
    except CliError as error:
        if "no Kafka for the" in str(error) and not given:
            raise CliError(f"give --bootstrap (or set {BOOTSTRAP_ENV}), or use --testbed") from None
        raise
    return _report(args, measure(args, configs, run_id))


@contextmanager
def _local_kafka() -> Iterator[str]:
    """``--testbed``: a broker of the harness for the run, its bootstrap address."""
    from ordo_testbed.kafka import KafkaTestbed

    with KafkaTestbed() as bed:
        yield bed.bootstrap


def _check(args: argparse.Namespace) -> None:
    for name in ("records", "record_size", "transaction_size", "partitions"):
        if getattr(args, name) < 1:
            raise CliError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.poll_timeout < 0:
        raise CliError(f"--poll-timeout must not be negative, got {args.poll_timeout}")
    if args.throughput == 0 or args.throughput < -1:
        raise CliError(f"--throughput must be positive (or -1: no cap), got {args.throughput:g}")


def client_configs(args: argparse.Namespace, bootstrap: str | None, run_id: str) -> EosConfigs:
    """The producer and consumer configs from the options (see :mod:`.eos_config`)."""
    sides: dict[str, dict[str, str]] = {}
    common = client_options(args)  # --command-config and -X: both sides, under each side's own
    try:
        for side in ("producer", "consumer"):
            path: Path | None = getattr(args, f"{side}_config")
            pairs: dict[str, str] = dict(common)
            if path is not None:
                try:
                    text = path.read_text()
                except OSError as error:
                    raise CliError(f"--{side}-config: cannot read {path}: {error.strerror}") from None
                pairs.update(parse_properties(text, str(path)))
            pairs.update(x_options(getattr(args, f"{side}_props"), f"--{side}-props"))
            sides[side] = pairs
        transactional_id = (
            args.transactional_id or sides["producer"].get("transactional.id") or f"ordo-eos-bench-{run_id}"
        )
        return eos_configs(
            bootstrap, sides["producer"], sides["consumer"], args.consumer_group_id, transactional_id
        )
    except (EosConfigError, InvalidConnectionError) as error:
        raise CliError(str(error)) from None


def measure(args: argparse.Namespace, configs: EosConfigs, run_id: str) -> EosResult:
    """Runs the loop (:mod:`.eos_loop`) to the end, then reads the output back to check it."""
    from confluent_kafka import KafkaException

    from .eos_loop import EosLoop

    try:
        with EosLoop(args, configs, run_id) as loop:
            while not loop.done:
                # the cap: wait until the records so far are due
                if loop.step() and args.throughput > 0 and loop.first_batch_at is not None:
                    ahead = loop.records / args.throughput - (time.monotonic() - loop.first_batch_at)
                    if ahead > 0:
                        time.sleep(ahead)
            seconds = time.monotonic() - loop.first_batch_at if loop.first_batch_at is not None else 0.0
    except KafkaException as error:
        raise CliError(f"the exactly-once loop failed: {error}") from None
    duplicates, lost = check_output(configs, loop.sink, run_id, args.records)
    return EosResult(loop.records, seconds, loop.transactions, loop.commit_latencies, duplicates, lost)


def check_output(configs: EosConfigs, topic: str, run_id: str, records: int) -> tuple[int, int]:
    """(duplicates, missing) of run ``run_id``'s ``records`` records in ``topic``'s committed output."""
    return tally(run_id, records, _read_committed(configs.consumer, topic))


def _read_committed(consumer_config: dict[str, str], topic: str) -> list[bytes]:
    """Every committed value of ``topic``, read to the end of each partition."""
    from confluent_kafka import Consumer, KafkaError

    reader = Consumer(
        logged(
            {
                **consumer_config,
                "group.id": f"ordo-eos-verify-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "enable.auto.commit": False,
            }
        )
    )
    try:
        partitions = len(reader.list_topics(topic, timeout=10).topics[topic].partitions)
        reader.subscribe([topic])
        values: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 120
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise CliError(f"could not read {topic!r} to its end for the verification")
            for m in reader.consume(1000, 0.5):
                error = m.error()
                if error is None:
                    values.append(m.value() or b"")
                    at_end.discard(m.partition() or 0)
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition() or 0)
        return values
    finally:
        reader.close()


def _report(args: argparse.Namespace, result: EosResult) -> int:
    from rich.console import Console
    from rich.table import Table

    mode = "with pre-registration" if args.pre_registration else "without pre-registration"
    table = Table(title=f"ordo bench eos — {mode}, {args.transaction_size} records per transaction")
    table.add_column("measure")
    table.add_column("value", justify="right")
    seconds = max(result.seconds, 1e-9)
    table.add_row("records", f"{result.records:,}")
    table.add_row("records/s", f"{result.records / seconds:,.0f}")
    table.add_row("transactions", f"{result.transactions:,}")
    table.add_row("transactions/s", f"{result.transactions / seconds:,.1f}")
    table.add_row("commit latency p50", f"{percentile(result.commit_latencies, 0.5) * 1000:,.1f} ms")
    table.add_row("commit latency p99", f"{percentile(result.commit_latencies, 0.99) * 1000:,.1f} ms")
    verdict = (
        "exactly once"
        if result.exactly_once
        else f"FAILED: {result.duplicates} duplicates, {result.missing} missing"
    )
    table.add_row("output (read_committed)", verdict)
    Console().print(table)
    return 0 if result.exactly_once else 1
