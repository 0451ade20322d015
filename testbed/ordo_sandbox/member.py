"""``python -m ordo_sandbox.member``: a ProducerGroup member copying the SQLite ``orders`` table.

For each source partition it owns, it reads the orders changed after the partition's checkpoint
(oldest first) and writes them to the topic keyed by customer, up to ``--batch`` orders per
transaction, committed with the checkpoint "last_change_ts of the last order written". A new or
restarted owner continues from the last committed checkpoint, so each order reaches Kafka once.

Prints one JSON line per event: ``started``, ``rebalance`` (generation, assigned with checkpoints,
revoked, lost), ``dropped``/``aborted`` (a unit given up, to be copied again), ``slow`` (a unit
that took over ``--slow`` seconds, e.g. blocked by an expansion's fence) and ``closed``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from ordo.errors import NotOwnedError, OrdoError, ProducerFencedError
from ordo.group import GroupProducer, Rebalance
from ordo_sandbox.kafka_settings import add_kafka_arguments, settings_from
from ordo_sandbox.scenario._program import stop_on_signals
from ordo_sandbox.source import connect, orders_after


def _say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "at": time.monotonic(), **fields}), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ordo_sandbox.member")
    add_kafka_arguments(parser)
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--db", type=Path, required=True, help="the SQLite source")
    parser.add_argument("--batch", type=int, default=200, help="orders per transaction, at most")
    parser.add_argument("--slow", type=float, default=0.25, help="report units slower than this, seconds")
    args = parser.parse_args(argv)
    kafka = settings_from(args, parser)

    stop = stop_on_signals()
    pod = os.environ.get("POD_NAME", "?")
    positions: dict[int, str | None] = {}  # owned source partition -> checkpoint to read after
    lock = threading.Lock()

    def on_rebalance(event: Rebalance) -> None:
        with lock:
            positions.update(event.assigned)
            for p in event.revoked + event.lost:
                positions.pop(p, None)
        _say("rebalance", generation=event.generation, assigned=event.assigned, revoked=event.revoked,
             lost=event.lost)  # fmt: skip

    member = GroupProducer.from_env({**kafka, "linger.ms": 5}, handle_sigterm=False, listener=on_rebalance)
    _say("started", pod=pod)
    try:
        with closing(connect(args.db)) as source:
            while not stop.is_set():
                with lock:
                    owned = sorted(positions.items())
                copied = sum(
                    _copy_unit(member, source, args, p, after, positions, lock) for p, after in owned
                )
                if not copied:
                    member.alive()  # still working, only nothing new: keeps the partitions (maxIdleSeconds)
                    stop.wait(0.05)  # nothing new in the source: poll it again shortly
    finally:
        member.close()
        _say("closed", pod=pod)
    return 0


def _copy_unit(
    member: GroupProducer,
    source: Any,
    args: argparse.Namespace,
    p: int,
    after: str | None,
    positions: dict[int, str | None],
    lock: threading.Lock,
) -> int:
    """Copy one unit of source partition ``p``; returns how many orders it committed."""
    orders = orders_after(source, p, after, args.batch)
    if not orders:
        return 0
    pod = os.environ.get("POD_NAME", "?")
    began = time.monotonic()
    try:
        with member.transaction(p) as tx:
            for order in orders:
                tx.produce(args.topic, order.value(pod), order.customer.encode())
            tx.commit(orders[-1].last_change_ts)
    except (NotOwnedError, ProducerFencedError) as error:
        _say("dropped", partition=p, why=str(error))
        with lock:
            positions.pop(p, None)
        return 0
    except OrdoError as error:  # aborted: the unit is copied again from the same checkpoint
        _say("aborted", partition=p, why=str(error))
        return 0
    took = time.monotonic() - began
    if took > args.slow:
        _say("slow", partition=p, seconds=round(took, 3), orders=len(orders))
    with lock:
        if p in positions:
            positions[p] = orders[-1].last_change_ts
    return len(orders)


if __name__ == "__main__":
    sys.exit(main())
