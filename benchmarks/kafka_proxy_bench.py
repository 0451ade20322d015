"""Produce/consume throughput and tail latency through the fault proxy vs straight to Apache Kafka:
what the proxy in front of the broker costs the tests that go through it.

.venv/bin/python -m benchmarks.kafka_proxy_bench [--records 200000] [--size 100]
"""

from __future__ import annotations

import argparse
import statistics
import time

from confluent_kafka import OFFSET_END, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ordo_testbed.kafka import KafkaTestbed

from ._result import Result


def produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000})
    payload = b"x" * size
    began = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=i % 4)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(60)
    return records / (time.perf_counter() - began)


def consume(bootstrap: str, topic: str, records: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
    began = time.perf_counter()
    seen, eofs = 0, 0
    while eofs < 4 or seen < records:
        for message in consumer.consume(10_000, 1.0):
            error = message.error()
            if error is None:
                seen += 1
            elif error.code() == KafkaError._PARTITION_EOF:
                eofs += 1
    rate = seen / (time.perf_counter() - began)
    consumer.close()
    return rate


def tail_latency(bootstrap: str, topic: str, records: int = 30) -> float:
    """Median seconds from a record's acknowledged write to a tailing consumer receiving it (one
    record at a time, the consumer waiting with librdkafka's default fetch.wait.max.ms)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tail", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    while (message := consumer.poll(5)) is None or message.error() is None:
        pass  # until the consumer sits at the end (its EOF)
    latencies = []
    for _ in range(records):
        producer.produce(topic, b"x", partition=0)
        producer.flush(10)
        written = time.perf_counter()
        while (message := consumer.poll(5)) is None or message.error() is not None:
            pass
        latencies.append(time.perf_counter() - written)
    consumer.close()
    return statistics.median(latencies)


Figures = dict[str, list[tuple[float, float, float]]]


def measure(records: int, size: int, rounds: int = 3) -> Figures:
    """Per round, (produce, consume) records/s and the tail latency, straight to Kafka and through
    the proxy, the first side alternating (a fresh broker's JIT warms up on whatever runs first)."""
    with KafkaTestbed() as bed:
        print(f"testbed start-up: {bed.startup_seconds:.3f}s")
        figures: Figures = {"direct": [], "proxy": []}
        sides = {"direct": bed.direct_bootstrap, "proxy": bed.bootstrap}
        for round_ in range(rounds):
            for label in sides if round_ % 2 else reversed(sides):
                bootstrap = sides[label]
                topic = f"bench-{label}-{round_}"
                admin = AdminClient({"bootstrap.servers": bootstrap})
                admin.create_topics([NewTopic(topic, 4)])[topic].result(10)
                figures[label].append(
                    (
                        produce(bootstrap, topic, records, size),
                        consume(bootstrap, topic, records),
                        tail_latency(bootstrap, topic),
                    )
                )
        return figures


def _results(figures: Figures) -> list[Result]:
    names = ("fault proxy produce", "fault proxy consume", "fault proxy tail latency p50")
    units = ("rec/s", "rec/s", "s")
    return [
        Result.paired(
            f"{name} (vs straight to Kafka)",
            [f[i] for f in figures["proxy"]],
            [f[i] for f in figures["direct"]],
            unit,
        )
        for i, (name, unit) in enumerate(zip(names, units, strict=True))
    ]


def run() -> list[Result]:
    return _results(measure(200_000, 100))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args()
    for result in _results(measure(args.records, args.size)):
        print(f"{result.name}: {result.ordo_text} vs {result.baseline_text} = {result.ratio_text}")


if __name__ == "__main__":
    main()
