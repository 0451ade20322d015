"""``python -m ordo_sandbox.scenario.consumer``: logs every record it processes, in processing order.

Each line: "monotonic_ns key seq partition offset" (the monotonic clock is the machine's, shared
by all processes). ``--plain`` uses the raw confluent-kafka Consumer: the control without a gate.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from ordo.client_config import logged
from ordo.control_topics import DEFAULT_EPOCH_TOPIC
from ordo.gated_consumer import GatedConsumer
from ordo.kafka_group_protocol import CLASSIC, GROUP_PROTOCOLS, with_classic_defaults
from ordo_sandbox.kafka_settings import add_kafka_arguments, settings_from
from ordo_sandbox.scenario._program import stop_on_signals
from ordo_sandbox.scenario.records import decode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ordo_sandbox.scenario.consumer")
    add_kafka_arguments(parser)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--plain", action="store_true", help="raw Consumer, no gate (control)")
    parser.add_argument("--epoch-topic", default=DEFAULT_EPOCH_TOPIC)
    parser.add_argument("--group-protocol", choices=GROUP_PROTOCOLS, default=CLASSIC)
    parser.add_argument(
        "--work-ms", type=float, default=0.0,
        help="simulated work per record, ms: a consumer working through an old partition's backlog "
        "while another reads the new partitions is when plain clients reorder moved keys",
    )  # fmt: skip
    args = parser.parse_args(argv)
    kafka = settings_from(args, parser)

    stop = stop_on_signals()
    config = with_classic_defaults(
        {
            **kafka,
            "group.id": args.group,
            "group.protocol": args.group_protocol,
            "auto.offset.reset": "earliest",
            "auto.commit.interval.ms": 200,
            "on_commit": _report_commit,
        },
        partition_assignment_strategy="cooperative-sticky",
        session_timeout_ms=6000,
    )
    # warnings (librdkafka's own lines among them, logger ordo.librdkafka) to stderr, timed
    logging.basicConfig(stream=sys.stderr, format="%(created).3f %(message)s")
    if os.environ.get("ORDO_SCENARIO_DEBUG"):  # the gate's pauses, resumes and stored offsets
        logging.getLogger("ordo.gated_consumer").setLevel(logging.DEBUG)
    if os.environ.get("ORDO_SCENARIO_RDKAFKA_DEBUG"):  # e.g. "cgrp,fetch": librdkafka's own view
        config["debug"] = os.environ["ORDO_SCENARIO_RDKAFKA_DEBUG"]
        logging.getLogger("ordo.librdkafka").setLevel(logging.DEBUG)
    consumer: GatedConsumer | Consumer
    if args.plain:
        # a classic member sees new partitions at librdkafka's periodic refresh (5 min by
        # default); the GatedConsumer asks when the epoch log publishes them
        consumer = Consumer(logged({**config, "topic.metadata.refresh.interval.ms": 1000}))
        consumer.subscribe([args.topic])
    else:
        consumer = GatedConsumer(config, [args.topic], epoch_topic=args.epoch_topic)
    print("ready", flush=True)
    report_at = time.monotonic()
    with args.out.open("w", buffering=1 << 16) as out:
        while not stop.is_set():
            batch = consumer.consume(500, 0.2)
            lines = []
            for message in batch:
                if message.error() is not None:
                    continue
                record = decode(message.value() or b"{}")
                where = f"{message.partition()} {message.offset()}"
                lines.append(f"{time.monotonic_ns()} {record.key} {record.seq} {where}\n")
            if lines:
                out.writelines(lines)
                out.flush()  # what is logged is what was processed, even if we are killed next
                if args.work_ms:
                    stop.wait(len(lines) * args.work_ms / 1000)  # the work, not a synchronisation
            if isinstance(consumer, GatedConsumer) and time.monotonic() > report_at:
                report_at = time.monotonic() + 2
                gates = {p: dict(g.waiting_for) for (t, p), g in consumer.closed_gates().items()}
                print(f"closed gates: {gates}", file=sys.stderr, flush=True)
                if os.environ.get("ORDO_SCENARIO_DEBUG"):
                    assigned = consumer.raw.assignment()
                    committed = {t.partition: t.offset for t in consumer.raw.committed(assigned, timeout=5)}
                    position = {t.partition: t.offset for t in consumer.raw.position(assigned)}
                    print(f"  committed {committed} position {position}", file=sys.stderr, flush=True)
    consumer.close()
    return 0


def _report_commit(error: Any, partitions: list[Any]) -> None:
    failed = [f"{p.partition}:{p.error}" for p in partitions if p.error is not None]
    if error is not None or failed:
        print(f"commit failed: {error} {failed}", file=sys.stderr, flush=True)
    elif os.environ.get("ORDO_SCENARIO_DEBUG"):
        done = {p.partition: p.offset for p in partitions}
        print(f"{time.time():.3f} committed {done}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
