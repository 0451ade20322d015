"""One producer of expansion_bench's keys rounds, in a process of its own as in a pod of its own:
six producers in the benchmark's process shared one interpreter lock, and their heartbeats (which
acknowledge fences) waited behind each other's produce loops (moved keys parked p99 0.11-0.36 s
there; a run with the two rule producers alone: max 0.04 s)."""

from __future__ import annotations

import time
from multiprocessing.connection import Connection
from typing import Any

from ordo.ordered_producer import OrderedProducer

Sample = tuple[float, float, bytes]  # (due at, seconds from due to delivery, key); CLOCK_MONOTONIC
"""CLOCK_MONOTONIC is the machine's: the parent's windows and a child's samples compare."""


class WholeFence(OrderedProducer):
    """The fence before issue 43: every record of a fenced topic waits (its produce() blocks)."""

    def _fenced(self, state: Any, key: bytes | None, partition: int | None, resending: bool) -> int:
        return 0  # wait

    def _route(self, topic: str, state: Any) -> None:
        if state.fence.blocked:
            self._routes.pop(topic, None)
            return
        super()._route(topic, state)


def run(connection: Connection, bootstrap: str, whole: bool, every: list[str], rate: int, keys: int) -> None:
    """Report every topic, say "ready", then write ``rate`` records/s of ``keys`` keys to the topic
    the parent names, to the next one it names, until it says None; then send back the delivered
    records' samples, the parks and the stalls."""
    config = {"bootstrap.servers": bootstrap, "linger.ms": 2}
    producer = (WholeFence if whole else OrderedProducer)(config, session_timeout=3.0)
    for name in every:  # a producer's first record of a topic waits for its epoch: not measured
        producer.partitions_for(name)
    producer.stalls.clear()
    samples: list[Sample] = []
    connection.send("ready")
    topic: str | None = connection.recv()
    begun = time.monotonic()
    i = 0
    while topic is not None:
        key = f"k{i % keys}".encode()
        due = begun + i / rate

        def delivered(error: Any, _message: Any, due: float = due, key: bytes = key) -> None:
            if error is None:
                samples.append((due, time.monotonic() - due, key))

        ahead = due - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)  # the schedule's pace, not synchronisation
        producer.produce(topic, b"x" * 100, key=key, on_delivery=delivered)
        i += 1
        if i % 10 == 0:
            producer.poll(0)
            while connection.poll():
                topic = connection.recv()
    producer.close()
    connection.send((samples, producer.parks, producer.stalls))
