"""A ProducerGroup member (KIP-509): copy the source partitions the operator assigns to this pod,
each unit of work committed together with its checkpoint.

Run it in the pods a ProducerGroup selects, with POD_NAME and POD_NAMESPACE from the downward
API and ORDO_GROUP = the group's name:

    ORDO_KAFKA_BOOTSTRAP=kafka:9092 python examples/group_member.py orders 500
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator

from ordo import GroupProducer, NotOwnedError, ProducerFencedError, Rebalance


def rows(partition: int, since: int, until: int) -> Iterator[tuple[int, str, str]]:
    """The source: (change timestamp, customer, row) of one source partition after ``since``."""
    for ts in range(since + 1, until + 1):
        yield ts, f"customer-{(partition * 7 + ts) % 50}", f'{{"partition": {partition}, "ts": {ts}}}'


def run(bootstrap: str, topic: str, rows_per_partition: int) -> None:
    positions: dict[int, int] = {}  # source partition -> last timestamp copied
    lock = threading.Lock()

    def on_rebalance(change: Rebalance) -> None:
        with lock:
            for p, checkpoint in change.assigned.items():
                positions[p] = int(checkpoint) if checkpoint else 0  # None: start afresh
            for p in change.revoked + change.lost:
                positions.pop(p, None)

    member = GroupProducer.from_env({"bootstrap.servers": bootstrap}, listener=on_rebalance)
    try:
        while True:
            with lock:
                work = {p: ts for p, ts in positions.items() if ts < rows_per_partition}
            for p, since in work.items():
                until = min(since + 50, rows_per_partition)
                try:
                    with member.transaction(source_partition=p) as tx:
                        for _ts, customer, row in rows(p, since, until):
                            tx.produce(topic, key=customer, value=row)
                        tx.commit(checkpoint=str(until))  # data + checkpoint, atomically
                except (NotOwnedError, ProducerFencedError):
                    continue  # the partition moved to another member
                with lock:
                    if p in positions:
                        positions[p] = until
            if not work:
                member.alive()  # working, only nothing to copy: keeps the partitions (maxIdleSeconds)
                time.sleep(0.1)  # idle until the next assignment or new rows
    finally:
        member.close()  # releases the Lease: the partitions move at once


if __name__ == "__main__":
    run(os.environ["ORDO_KAFKA_BOOTSTRAP"], sys.argv[1], int(sys.argv[2]))
