"""Produce keyed records with OrderedProducer and read them back with GatedConsumer.

    ORDO_KAFKA_BOOTSTRAP=127.0.0.1:9092 python examples/ordered_pipeline.py orders 1000

Run it while an OrderedTopicExpansion grows ``orders``: every customer's records still come out
in the order they were produced.
"""

from __future__ import annotations

import os
import sys

from ordo import GatedConsumer, OrderedProducer


def produce(bootstrap: str, topic: str, records: int, **options: str) -> None:
    with OrderedProducer({"bootstrap.servers": bootstrap, "linger.ms": 5}, **options) as producer:  # type: ignore[arg-type]
        for i in range(records):
            # blocks (never drops) while an expansion fences the topic
            producer.produce(topic, value=f"order-{i}", key=f"customer-{i % 100}")
        producer.flush()


def consume(bootstrap: str, topic: str, group: str, records: int, **options: str) -> list[str]:
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "cooperative-sticky",
    }
    seen: list[str] = []
    with GatedConsumer(config, [topic], **options) as consumer:  # type: ignore[arg-type]
        while len(seen) < records:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen.append((message.value() or b"").decode())  # handle it here
        consumer.commit()
    return seen


if __name__ == "__main__":
    bootstrap, topic, count = os.environ["ORDO_KAFKA_BOOTSTRAP"], sys.argv[1], int(sys.argv[2])
    produce(bootstrap, topic, count)
    print(len(consume(bootstrap, topic, "example", count)), "records consumed")
