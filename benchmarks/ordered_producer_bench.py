"""OrderedProducer vs the raw confluent-kafka Producer: keyed 100-byte records, side by side."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo.ordered_producer import OrderedProducer

from ._result import Result
from ._testbed import kafka_bootstrap

RECORDS = 200_000
VALUE = b"x" * 100


def _timed(produce: Callable[[str, bytes, bytes], None], flush: Callable[[], object], topic: str) -> float:
    keys = [f"customer-{i % 5000}".encode() for i in range(RECORDS)]
    start = time.perf_counter()
    for key in keys:
        produce(topic, VALUE, key)
    flush()
    return RECORDS / (time.perf_counter() - start)


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
        raw_rates, ordo_rates = [], []
        for _ in range(3):  # interleaved, best of three: both see the same machine load
            raw_rates.append(_timed(lambda t, v, k: raw.produce(t, v, key=k), lambda: raw.flush(60), "bench"))
            ordo_rates.append(
                _timed(lambda t, v, k: ordo.produce(t, v, key=k), lambda: ordo.flush(60), "bench")
            )
        ordo.close()
        writer.close()
    return [
        Result(
            "OrderedProducer vs raw Producer, keyed 100 B", max(ordo_rates), max(raw_rates), "rec/s", ">= 0.9"
        )
    ]
