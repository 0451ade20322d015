"""OrderedProducer vs the raw confluent-kafka Producer: keyed 100-byte records, side by side.

Two figures. *Until delivered*: records per second from the first produce() until flush()
returned, in rounds of four runs, ordo-raw-raw-ordo or raw-ordo-ordo-raw in turn, and the round
with the median ratio. Whichever side ran second in a pair was up to 2x slower (the testbed
broker still busy with the first run's batches), so a lone pair's ratio says mostly who went
first; a round gives both sides each place once. *Enqueue only*: the client's own cost per
produce(), in alternating blocks of records so that both producers see the same moment of the
machine."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo.ordered_producer import OrderedProducer

from ._result import Result, Stopwatch
from ._testbed import kafka_bootstrap

RECORDS = 500_000
ROUNDS = 6  # of four runs each
BLOCK = 5_000  # records per block of the enqueue comparison
VALUE = b"x" * 100
KEYS = [f"customer-{i % 5000}".encode() for i in range(RECORDS)]

Produce = Callable[[str, bytes, bytes], None]


def _until_delivered(produce: Produce, flush: Callable[[], object]) -> tuple[float, float]:
    """(records/s, CPU µs/record) from the first produce() until flush() returned."""
    clock = Stopwatch()
    for key in KEYS:
        produce("bench", VALUE, key)
    flush()
    return clock.rate(RECORDS), clock.cpu_us(RECORDS)


def _enqueue_rates(sides: dict[str, tuple[Produce, Callable[[], object]]]) -> dict[str, float]:
    """Records per second each side's produce() takes, measured in alternating blocks."""
    spent = dict.fromkeys(sides, 0.0)
    for first in range(0, RECORDS, BLOCK):
        block = KEYS[first : first + BLOCK]
        for name, (produce, _) in sides.items() if first // BLOCK % 2 else reversed(sides.items()):
            start = time.perf_counter()
            for key in block:
                produce("bench", VALUE, key)
            spent[name] += time.perf_counter() - start
    for _, flush in sides.values():
        flush()
    return {name: RECORDS / seconds for name, seconds in spent.items()}


def run() -> list[Result]:
    with kafka_bootstrap() as bootstrap:
        config = {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
        admin = AdminClient({"bootstrap.servers": bootstrap})
        ensure_log_topics(admin)
        admin.create_topics([NewTopic("bench", 12)])["bench"].result(10)
        writer = EpochLogWriter(config)
        writer.write(EpochHistory.initial("bench", 12))
        raw = Producer({**config, "partitioner": "murmur2_random"})
        ordo = OrderedProducer(config)
        sides: dict[str, tuple[Produce, Callable[[], object]]] = {
            "ordo": (lambda t, v, k: ordo.produce(t, v, key=k), lambda: ordo.flush(60)),
            "raw": (lambda t, v, k: raw.produce(t, v, key=k), lambda: raw.flush(60)),
        }
        delivered: dict[str, list[float]] = {"ordo": [], "raw": []}
        cpu: dict[str, list[float]] = {"ordo": [], "raw": []}
        for round_ in range(ROUNDS):
            order = ("ordo", "raw", "raw", "ordo") if round_ % 2 else ("raw", "ordo", "ordo", "raw")
            runs: dict[str, list[tuple[float, float]]] = {"ordo": [], "raw": []}
            for name in order:
                runs[name].append(_until_delivered(*sides[name]))
            for name, samples in runs.items():  # the same records each run: the harmonic mean
                delivered[name].append(len(samples) / sum(1 / rate for rate, _ in samples))
                cpu[name].append(sum(us for _, us in samples) / len(samples))
        enqueue = _enqueue_rates(sides)
        ordo.close()
        writer.close()
    rounds = zip(delivered["ordo"], delivered["raw"], cpu["ordo"], cpu["raw"], strict=True)
    shown = ", ".join(f"{o:,.0f}/{r:,.0f} {oc:.2f}/{rc:.2f}" for o, r, oc, rc in rounds)
    print(f"  until delivered, per round (ordo / raw rec/s, CPU µs/record): {shown}")
    return [
        Result.paired(
            "OrderedProducer vs raw Producer, keyed 100 B",
            delivered["ordo"],
            delivered["raw"],
            "rec/s",
            ">= 0.9",
            (cpu["ordo"], cpu["raw"]),
        ),
        Result("OrderedProducer vs raw Producer, enqueue only", enqueue["ordo"], enqueue["raw"], "rec/s"),
    ]
