"""Process records on a thread pool with AsyncConsumer (KIP-983): the partitions that stay keep
flowing while revoked ones finish their work.

    KAFKA_BOOTSTRAP=127.0.0.1:9092 python examples/async_processing.py orders 1000
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import Message

from ordo.async_consumer import AsyncConsumer


def process_all(bootstrap: str, topic: str, group: str, records: int) -> int:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    consumer = AsyncConsumer(config, [topic], ordering="key")  # per key in order, keys in parallel
    processed = 0

    def handle(record: Message) -> None:
        _ = record.value()  # the real work goes here
        consumer.done(record)  # from any thread: commits follow the contiguous done offsets

    with ThreadPoolExecutor(max_workers=4) as pool:
        while processed < records:
            batch = consumer.poll(timeout=1.0)
            for record in batch.records:
                pool.submit(handle, record)
                processed += 1
            if batch.to_be_revoked:
                # keep the revocation open until their work is done (False once they are lost)
                consumer.delay_revoke(batch.to_be_revoked)
    consumer.close()
    return processed


if __name__ == "__main__":
    print(process_all(os.environ["KAFKA_BOOTSTRAP"], sys.argv[1], "example", int(sys.argv[2])), "processed")
