"""Process records on a thread pool with AsyncConsumer (KIP-983): the partitions that stay keep
flowing while revoked ones finish their work.

    ORDO_KAFKA_BOOTSTRAP=127.0.0.1:9092 python examples/async_processing.py orders 1000
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import Message

from ordo import AsyncConsumer


def connect(bootstrap: str, topic: str, group: str) -> AsyncConsumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    return AsyncConsumer(config, [topic], ordering="key")  # per key in order, keys in parallel


def run(consumer: AsyncConsumer, work: Callable[[Message], None], stop: threading.Event) -> None:
    """The poll loop, until ``stop`` is set; then closes ``consumer``."""

    def handle(record: Message) -> None:
        work(record)
        consumer.done(record)  # from any thread: commits follow the contiguous done offsets

    with ThreadPoolExecutor(max_workers=4) as pool:
        while not stop.is_set():
            batch = consumer.poll(timeout=0.1)
            for record in batch.records:
                pool.submit(handle, record)
            # hold a revocation open only while its partitions have work out: the others complete
            # at the next poll. Delaying every one would hold it until revoke_timeout, then lose it.
            busy = consumer.unfinished(batch.to_be_revoked)
            if busy:
                consumer.delay_revoke(busy)
            # batch.lost: their work will not be committed (done() ignores it); stop it if you can
    consumer.close()


def process_all(bootstrap: str, topic: str, group: str, records: int) -> int:
    """Process ``records`` records (alone in ``group``); returns how many were processed."""
    processed = 0
    lock, stop = threading.Lock(), threading.Event()

    def work(record: Message) -> None:
        nonlocal processed
        _ = record.value()  # the real work goes here
        with lock:
            processed += 1
            if processed >= records:
                stop.set()

    run(connect(bootstrap, topic, group), work, stop)
    return processed


if __name__ == "__main__":
    print(
        process_all(os.environ["ORDO_KAFKA_BOOTSTRAP"], sys.argv[1], "example", int(sys.argv[2])), "processed"
    )
