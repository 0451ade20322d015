"""KIP-983 and KIP-253 in one consumer (issue 35, item 6): gated AsyncConsumers whose pools
process records with random per-record delays, while ordo's producers write and the operator
grows the topic 4 -> 6 -> 8, and a second member joins the group in the middle (a rebalance while
the first holds gates). The independent verifier, over the order in which the workers *finished*
the records (per key, both members' logs merged by time), finds no key out of order and nothing
lost; the same run without the gate (the control) shows reorderings, so the check can fail."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Message

from ordo.async_consumer import AsyncConsumer
from ordo.kafka_group_protocol import with_classic_defaults
from ordo_sandbox.scenario.progress import partition_progress
from ordo_sandbox.scenario.records import decode
from ordo_sandbox.scenario.verify import Verdict, read_delivered, verify
from ordo_sandbox.scenario.workload import Workload
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import end_offsets
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions
from ordo_testbed.waiting import wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.slow]
WORK = 0.004  # the longest random work per record, seconds: 4 workers keep up with ~2,000 records/s
RATE = 750  # records/s per producer (2 producers): the first member alone falls behind


@pytest.fixture
def expansions(kube: Kube, operator_process: Callable[..., OperatorProcess]) -> Iterator[Expansions]:
    operator = operator_process().start()
    yield Expansions(kube.custom, kube.namespace)
    operator.stop()


class _Member:
    """A member of the group on a thread of its own: an AsyncConsumer whose records a pool of 4
    processes, each for a random time; a record is logged when its worker finishes it, then
    marked done. Revocations are delayed until the revoked partitions' records are done."""

    def __init__(self, name: str, config: dict[str, Any], topic: str, gate: bool, epochs: str) -> None:
        self.name = name
        self.consumer = AsyncConsumer(config, [topic], ordering="key", gate=gate, epoch_topic=epochs)
        self.lines: list[str] = []  # "at_ns key seq partition offset", in the order workers finished
        self._lock = threading.Lock()
        self._random = random.Random(name)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name)
        self._thread.start()

    def _work(self, record: Message) -> None:
        time.sleep(self._random.uniform(0, WORK))  # the work itself: a random time per record
        numbered = decode(record.value() or b"")
        line = f"{time.monotonic_ns()} {numbered.key} {numbered.seq} {record.partition()} {record.offset()}\n"
        with self._lock:
            self.lines.append(line)
        self.consumer.done(record)

    def _run(self) -> None:
        with ThreadPoolExecutor(4) as pool:
            while not self._stop.is_set():
                batch = self.consumer.poll(0.05)
                for record in batch.records:
                    pool.submit(self._work, record)
                busy = self.consumer.unfinished(batch.to_be_revoked)
                if busy:
                    self.consumer.delay_revoke(busy)
        self.consumer.close()

    def describe(self) -> str:
        """What a drain that did not finish needs to be understood."""
        consumer = self.consumer
        through: dict[int, int] = {}
        with self._lock:
            for line in self.lines:
                partition, offset = int(line.split()[3]), int(line.split()[4])
                through[partition] = max(through.get(partition, 0), offset + 1)
        return (
            f"{self.name}: owns {sorted(p for _, p in consumer.assignment())}, processed through {through}, "
            f"in flight {consumer.in_flight}, buffered {consumer.buffered}, gates "
            f"{ {p: dict(g.waiting_for) for (_, p), g in consumer.closed_gates().items()} }"
        )

    def processed(self) -> set[tuple[str, int]]:
        with self._lock:
            return {(line.split()[1], int(line.split()[2])) for line in self.lines}

    def stop(self, directory: Path) -> Path:
        self._stop.set()
        self._thread.join(60)
        path = directory / f"{self.name}.log"
        with self._lock:
            path.write_text("".join(self.lines))
        return path


def _written(kafka: KafkaHandle, topic: str, partitions: int) -> int:
    return sum(end_offsets(kafka.bootstrap, topic, partitions).values())


def _more_traffic(kafka: KafkaHandle, topic: str, partitions: int, records: int) -> None:
    start = _written(kafka, topic, partitions)
    wait_for(lambda: _written(kafka, topic, partitions) >= start + records, 60, f"{records} more records")


def _run(
    kafka: KafkaHandle, grow: Expansions, log_topics: tuple[str, str], directory: Path, gate: bool
) -> Verdict:
    epochs, registry = log_topics
    topic = kafka.create_topic(4)
    workload = Workload(
        kafka.bootstrap, topic, directory, producers=2, consumers=0, keys=200, rate=RATE,
        epoch_topic=epochs, registry_topic=registry,
    )  # fmt: skip
    config = with_classic_defaults(
        kafka.config(group_id=kafka.topic("g"), auto_offset_reset="earliest"),
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
    )
    if not gate:  # a classic member sees new partitions at librdkafka's periodic refresh (5 min by
        # default); the gated one asks when the epoch log publishes them
        config["topic.metadata.refresh.interval.ms"] = 1000
    members: list[_Member] = []
    workload.start_producers()
    try:
        _more_traffic(kafka, topic, 4, 2000)  # a backlog of epoch 0 ...
        grow.create("grow-to-6", topic, 6, fenceTimeoutSeconds=30)
        grow.wait_phase("grow-to-6", "Completed", 60)
        _more_traffic(kafka, topic, 6, 1500)  # ... and of epoch 1, when the first member starts
        members.append(_Member("first", config, topic, gate, epochs))
        first = members[0]
        if gate:  # the rebalance comes while the first member holds gates of the expansion
            wait_for(first.consumer.closed_gates, 60, "the first member's gates to hold")
        wait_for(lambda: len(first.processed()) >= 1000, 60, "the first member's first 1,000 records")
        members.append(_Member("second", config, topic, gate, epochs))
        second = members[1]
        wait_for(
            lambda: second.consumer.assignment() and len(second.processed()) >= 200, 60, "the second's work"
        )
        grow.create("grow-to-8", topic, 8, fenceTimeoutSeconds=30)
        grow.wait_phase("grow-to-8", "Completed", 60)
        _more_traffic(kafka, topic, 8, 1500)
        delivered = workload.stop_producers()
        done: set[tuple[str, int]] = set()

        def drained() -> bool:
            done.clear()
            for member in members:
                done.update(member.processed())
            return len(done) >= delivered

        try:
            wait_for(drained, 120, f"every one of the {delivered} records delivered to be processed")
        except AssertionError as error:
            where = partition_progress(kafka.bootstrap, topic, config["group.id"])
            states = [member.describe() for member in members]
            raise AssertionError(f"{error}: {len(done)} processed; {states}; {where}") from None
    finally:
        workload.stop_producers()
        logs = [member.stop(directory) for member in members]
    verdict = verify(read_delivered(workload.delivered_paths()), logs)
    print(("gated: " if gate else "control, no gate: ") + verdict.summary(), verdict.examples)
    return verdict


def test_records_processed_on_pools_stay_in_order_through_expansions_and_a_rebalance(
    kafka: KafkaHandle, expansions: Expansions, log_topics: tuple[str, str], tmp_path: Path
) -> None:
    verdict = _run(kafka, expansions, log_topics, tmp_path, gate=True)
    assert verdict.order_violations == 0, verdict.examples
    assert verdict.lost == 0, verdict.missing


def test_control_without_the_gate_the_pools_reorder_moved_keys(
    kafka: KafkaHandle, expansions: Expansions, log_topics: tuple[str, str], tmp_path: Path
) -> None:
    verdict = _run(kafka, expansions, log_topics, tmp_path, gate=False)
    assert verdict.order_violations > 0, "the control must show that the check can fail"
    assert verdict.lost == 0, verdict.missing
