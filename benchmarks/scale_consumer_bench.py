"""AsyncConsumer as its assignment grows (issue: scale): 10 -> 1,000 partitions of one topic
assigned to one consumer, the same records spread over them. Per size:

- per-record overhead: poll() and done() at once on the caller's thread (no work), microseconds
  per record, beside a raw confluent-kafka Consumer reading the same topic (consume + store);
- commit cost: the offsets each of the AsyncConsumer's commits carries (its ``on_commit``), and
  the round trip of one synchronous commit of every assigned partition.

``ORDO_SCALE=long``: 3 x the records.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ordo.async_consumer import AsyncConsumer

from ._result import Result
from ._testbed import kafka_bootstrap
from .scale_bench import LONG, growth

PARTITIONS = (10, 100, 1_000)
RECORDS = 300_000 if LONG else 100_000
VALUE = b"x" * 100


def _fill(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(topic, VALUE, f"k{i % 5_000}".encode(), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(60)


def _config(bootstrap: str, group: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}


def _async(bootstrap: str, topic: str) -> tuple[float, list[int]]:
    """Seconds per record, and the offsets each commit carried."""
    carried: list[int] = []
    config = _config(bootstrap, f"async-{topic}-{time.monotonic_ns()}")
    config["on_commit"] = lambda _error, partitions: carried.append(len(partitions))
    consumer = AsyncConsumer(config, [topic], ordering="key", commit_interval=0.5)
    try:
        handed, began = 0, None
        while handed < RECORDS:
            batch = consumer.poll(1.0)
            if began is None and batch.records:
                began = time.perf_counter()
            for record in batch.records:
                consumer.done(record)
            handed += len(batch.records)
        assert began is not None
        return (time.perf_counter() - began) / RECORDS, carried
    finally:
        consumer.close()


def _raw(bootstrap: str, topic: str) -> float:
    consumer = Consumer(
        {**_config(bootstrap, f"raw-{topic}-{time.monotonic_ns()}"), "enable.auto.offset.store": False}
    )
    consumer.subscribe([topic])
    try:
        handed, began = 0, None
        while handed < RECORDS:
            for message in consumer.consume(1_000, 1.0):
                if message.error() is not None:
                    continue
                if began is None:
                    began = time.perf_counter()
                consumer.store_offsets(message=message)
                handed += 1
        assert began is not None
        return (time.perf_counter() - began) / RECORDS
    finally:
        consumer.close()


def _commit_seconds(bootstrap: str, topic: str, partitions: int) -> float:
    """The median round trip of a synchronous commit of every partition's offset."""
    consumer = Consumer(_config(bootstrap, f"commit-{topic}"))
    try:
        offsets = [TopicPartition(topic, p, 1) for p in range(partitions)]
        times = []
        for _ in range(5):
            began = time.perf_counter()
            consumer.commit(offsets=offsets, asynchronous=False)
            times.append(time.perf_counter() - began)
        return statistics.median(times)
    finally:
        consumer.close()


def run() -> list[Result]:
    rows: list[tuple[int, float, float, list[int], float]] = []
    with kafka_bootstrap() as bootstrap:
        for partitions in PARTITIONS:
            topic = f"scale-consume-{partitions}"
            _fill(bootstrap, topic, partitions)
            ours, carried = _async(bootstrap, topic)
            raw = _raw(bootstrap, topic)
            commit = _commit_seconds(bootstrap, topic, partitions)
            rows.append((partitions, ours, raw, carried, commit))
            line = f"AsyncConsumer {ours * 1e6:.1f} us/record, raw {raw * 1e6:.1f}; {len(carried)} commits "
            line += f"of up to {max(carried, default=0)} offsets; one of all {commit * 1e3:.1f} ms"
            print(f"  {partitions:>5} partitions: {line}")
    top = rows[-1]
    k = growth([r[0] for r in rows], [r[1] for r in rows])
    k_commit = growth([r[0] for r in rows], [r[4] for r in rows])
    return [
        Result(
            f"AsyncConsumer per-record overhead (poll + done, no work), {top[0]:,} partitions assigned, vs "
            f"raw Consumer consume + store_offsets (growth in partitions O(n^{k:.2f}))",
            top[1] * 1e6,
            top[2] * 1e6,
            "us",
        ),
        Result.absolute(
            f"commit of all {top[0]:,} partitions' offsets, one synchronous round trip "
            f"(O(n^{k_commit:.2f})); the AsyncConsumer's commits carried up to {max(top[3], default=0):,} "
            "offsets each",
            top[4] * 1e3,
            "ms",
        ),
    ]
