"""``python -m ordo_sandbox.scenario.ramp_producer``: an OrderedProducer load generator whose rate
ramps (``ordo sandbox --autoscale``).

Writes numbered records (:mod:`ordo_sandbox.scenario.records`: ``{"k": key, "s": n}``) of
``--keys`` keys at a rate growing from ``--start`` to ``--end`` records/s over ``--seconds``, then
``--hold`` seconds at ``--end``, through produce()'s C path (no per-record callback). Appends
"sent N" to ``--progress`` every second; when the ramp ends (or on SIGTERM) it flushes and writes
each key's highest number ("key n" lines, what :func:`~ordo_sandbox.scenario.verify.read_delivered`
reads) to ``--out``: what must be in Kafka, each once and in order.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from ordo.control_topics import DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC
from ordo.errors import ProduceBlockedError
from ordo.ordered_producer import OrderedProducer
from ordo_sandbox.kafka_settings import add_kafka_arguments, settings_from
from ordo_sandbox.ramp import Ramp
from ordo_sandbox.scenario._program import stop_on_signals
from ordo_sandbox.scenario.records import Numbered, encode, key_name

TICK = 0.005  # seconds between rounds of records: the pace, not a synchronisation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ordo_sandbox.scenario.ramp_producer")
    add_kafka_arguments(parser)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--id", type=int, required=True, help="generator number (keys are disjoint)")
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--start", type=float, required=True, help="records/s at the start")
    parser.add_argument("--end", type=float, required=True, help="records/s at the ramp's end")
    parser.add_argument("--seconds", type=float, required=True, help="the ramp's length")
    parser.add_argument("--hold", type=float, default=0.0, help="seconds at --end after the ramp")
    parser.add_argument("--out", type=Path, required=True, help="each key's highest number, at the end")
    parser.add_argument("--progress", type=Path, required=True, help="'sent N' every second")
    parser.add_argument("--linger-ms", type=int, default=10)
    parser.add_argument("--epoch-topic", default=DEFAULT_EPOCH_TOPIC)
    parser.add_argument("--registry-topic", default=DEFAULT_REGISTRY_TOPIC)
    args = parser.parse_args(argv)
    kafka = settings_from(args, parser)
    ramp = Ramp(args.start, args.end, args.seconds, args.hold)

    stop = stop_on_signals()
    producer = OrderedProducer(
        {**kafka, "linger.ms": args.linger_ms, "enable.idempotence": True},
        producer_id=f"sandbox-ramp-{args.id}",
        session_timeout=3.0,
        block_timeout=60.0,
        epoch_topic=args.epoch_topic,
        registry_topic=args.registry_topic,
    )
    rng = random.Random(args.id)
    sequence = [0] * args.keys
    names = [key_name(args.id, i) for i in range(args.keys)]
    sent = 0
    print("ready", flush=True)
    began = report_at = time.monotonic()
    with args.progress.open("a", buffering=1) as progress:
        while not stop.is_set():
            elapsed = time.monotonic() - began
            if elapsed >= ramp.total_seconds:
                break
            due = ramp.due(elapsed)
            while sent < due and not stop.is_set():
                index = rng.randrange(args.keys)
                key = names[index]
                try:
                    producer.produce(args.topic, encode(Numbered(key, sequence[index])), key=key.encode())
                except ProduceBlockedError:
                    continue  # held by a long fence: another key is tried, nothing is dropped
                except BufferError:
                    producer.poll(0.1)
                    continue
                sequence[index] += 1
                sent += 1
            producer.poll(0)
            if time.monotonic() >= report_at:
                report_at += 1.0
                progress.write(f"sent {sent}\n")
            stop.wait(TICK)
        unsent = producer.flush(60)
        progress.write(f"sent {sent}\n")
    if unsent:  # neither delivered nor failed: the verifier counts them missing, this says why
        print(f"{unsent} records still unacknowledged after flush(60)", file=sys.stderr, flush=True)
    producer.close()
    args.out.write_text("".join(f"{names[i]} {n - 1}\n" for i, n in enumerate(sequence) if n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
