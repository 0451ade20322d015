"""Consume, transform and produce exactly once, with the transaction's partitions and group
declared up front (KIP-609): a write outside them fails at once and aborts the transaction.

    ORDO_KAFKA_BOOTSTRAP=127.0.0.1:9092 python examples/exactly_once_transform.py in out 1000
"""

from __future__ import annotations

import os
import sys

from confluent_kafka import Consumer

from ordo import OrderedProducer


def transform(bootstrap: str, source: str, target: str, group: str, records: int, **options: str) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([source])
    producer = OrderedProducer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{group}-transform"},
        **options,  # type: ignore[arg-type]
    )
    producer.init_transactions()
    done = 0
    while done < records:
        batch = [m for m in consumer.consume(500, 1.0) if m.error() is None]
        if not batch:
            continue
        # where these keys go now: after an expansion of the target too
        declared = producer.partitions_of(target, [message.key() for message in batch])
        with producer.transaction(partitions={target: declared}, group_id=group) as tx:
            for message in batch:
                tx.produce(target, value=(message.value() or b"").upper(), key=message.key())
            positions = consumer.position(consumer.assignment())
            tx.send_offsets(positions, consumer.consumer_group_metadata())
            tx.commit()
        done += len(batch)
    consumer.close()
    producer.close()
    return done


if __name__ == "__main__":
    source, target, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print(transform(os.environ["ORDO_KAFKA_BOOTSTRAP"], source, target, "example", count), "records")
