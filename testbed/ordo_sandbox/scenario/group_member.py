"""``python -m ordo_sandbox.scenario.group_member``: a ProducerGroup member copying a synthetic source.

Source partition p holds records 0..N-1; the member writes them in units of ``--batch`` records,
each unit committed with the checkpoint "next record to copy", so a restarted or new owner
continues where the last committed unit ended. Records are keyed ``src-<p>`` (one Kafka partition
per source partition) with value ``{"p": p, "seq": i, "member": pod, "generation": g}`` (the
assignment generation the unit was opened under). Prints one JSON line per
rebalance event; SIGTERM closes the member (releasing its Lease). With ``--hang-at``, the copy loop
hangs once, inside the unit that would copy that record, before committing it (the Lease thread
goes on: only ``maxIdleSeconds`` notices). Kafka: ``--bootstrap`` and/or ``--kafka-config FILE`` (the whole
connection, :mod:`ordo_sandbox.kafka_settings`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

from ordo.control_topics import DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC
from ordo.errors import NotOwnedError, OrdoError, ProducerFencedError
from ordo.group import GroupProducer, Rebalance
from ordo_sandbox.kafka_settings import add_kafka_arguments, settings_from
from ordo_sandbox.scenario._program import Pacer, stop_on_signals

_printing = threading.Lock()


def say(event: dict[str, Any]) -> None:
    """One JSON line, whole: the listener (on the member's threads) and the copy loop both print."""
    with _printing:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ordo_sandbox.scenario.group_member")
    add_kafka_arguments(parser)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--records", type=int, default=1000, help="records per source partition")
    parser.add_argument("--batch", type=int, default=10, help="records per transaction")
    parser.add_argument("--rate", type=float, default=20.0, help="transactions per second (0: unpaced)")
    parser.add_argument("--epoch-topic", default=DEFAULT_EPOCH_TOPIC)
    parser.add_argument("--registry-topic", default=DEFAULT_REGISTRY_TOPIC)
    parser.add_argument("--hang-at", type=int, help="hang once in the unit that copies this record")
    parser.add_argument("--hang-seconds", type=float, default=60.0, help="how long it hangs")
    args = parser.parse_args(argv)
    kafka = settings_from(args, parser)
    hang_at: int | None = args.hang_at

    stop = stop_on_signals()
    pod = os.environ.get("POD_NAME", "?")
    positions: dict[int, int] = {}  # source partition -> next record to copy
    lock = threading.Lock()

    def on_rebalance(event: Rebalance) -> None:
        with lock:
            for p, checkpoint in event.assigned.items():
                positions[p] = int(checkpoint) if checkpoint is not None else 0
            for p in event.revoked + event.lost:
                positions.pop(p, None)
        line = {"event": "rebalance", "generation": event.generation, "assigned": event.assigned}
        say({**line, "revoked": event.revoked, "lost": event.lost})

    config: dict[str, Any] = {**kafka, "linger.ms": 5}
    member = GroupProducer.from_env(
        config,
        handle_sigterm=False,
        listener=on_rebalance,
        epoch_topic=args.epoch_topic,
        registry_topic=args.registry_topic,
    )
    say({"event": "started", "pod": pod})
    pacer = Pacer(args.rate)
    try:
        while not stop.is_set():
            with lock:
                work = sorted((p, n) for p, n in positions.items() if n < args.records)
            if not work:
                member.alive()  # nothing to copy, but working: keeps the partitions (maxIdleSeconds)
                stop.wait(0.05)  # idle until an assignment arrives (a program's idle loop)
                continue
            for p, start in work:
                end = min(start + args.batch, args.records)
                try:
                    with member.transaction(p) as tx:
                        for seq in range(start, end):
                            value = json.dumps(
                                {"p": p, "seq": seq, "member": pod, "generation": tx.generation}
                            )
                            tx.produce(args.topic, value.encode(), f"src-{p}".encode())
                        if hang_at is not None and start <= hang_at < end:
                            hang_at = None
                            say({"event": "hung", "partition": p, "seq": start})
                            time.sleep(args.hang_seconds)  # the hang itself: no alive(), no commit
                        tx.commit(str(end))
                except (NotOwnedError, ProducerFencedError) as error:
                    say({"event": "dropped", "partition": p, "why": str(error)})
                    with lock:
                        positions.pop(p, None)
                    continue
                except OrdoError as error:  # aborted: the unit is written again
                    say({"event": "aborted", "partition": p, "why": str(error)})
                    continue
                with lock:
                    if p in positions:
                        positions[p] = end
                pacer.wait(stop)
                if stop.is_set():
                    break
    finally:
        member.close()
        say({"event": "closed", "pod": pod})
    return 0


if __name__ == "__main__":
    sys.exit(main())
