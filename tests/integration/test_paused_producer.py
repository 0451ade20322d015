"""KIP-253's promise when a producer is paused or cut off past its session during an expansion.

A process frozen by SIGSTOP (as by a VM or node freeze) with records in librdkafka's queue (linger
2 s), or whose Produce requests the network holds past its session, can wake after the operator
judged it gone. Before ordo bounded that, the expansion went ahead without it, and on SIGCONT
thousands of its queued records landed in the old partitions after the thresholds, by the old
count: a fresh GatedConsumer group delivered keys out of order. Now, by default
(``fencing="broker"``), the operator has Kafka fence it (InitProducerId of its transactional id):
its open transaction is aborted and its writes refused, and on waking it sends them again by the
new count; with ``fencing="lease"`` the fence waits until nothing a silent producer queued can
still land (its session and delivery timeout after its last report), and a producer whose lease
lapsed queues nothing until it has re-read the epoch log.

Judged from what reached Kafka: the independent verifier (``ordo.verify``, a key found in two
partitions within one epoch counts as out of order), and a fresh GatedConsumer group reading the
topic from the beginning; a plain consumer of the same topic is the control that can fail.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ordo.verify import KeyOrder
from ordo.verify.topic import StoredRecord, check_topic, read_epochs, read_topic
from ordo_sandbox.scenario.verify import Processed, read_acknowledged, read_processed
from ordo_sandbox.scenario.workload import Workload
from ordo_testbed.kafka import Fault
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import await_records
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.records import RECORDS
from ordo_testbed.resources import Expansions
from ordo_testbed.waiting import wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

SESSION = 3.0
LINGER_MS = 2000  # records wait in librdkafka's queue this long: a pause always catches some


@pytest.fixture
def expansions(
    kube: Kube, operator_process: Callable[..., OperatorProcess]
) -> Iterator[tuple[Expansions, OperatorProcess]]:
    operator = operator_process().start()
    yield Expansions(kube.custom, kube.namespace), operator
    operator.stop()


def _workload(
    bootstrap: str,
    topic: str,
    directory: Path,
    log_topics: tuple[str, str],
    delivery_ms: int,
    fencing: str = "broker",
    **kw: Any,
) -> Workload:
    epochs, registry = log_topics
    options = ["--session-timeout", str(SESSION), "--linger-ms", str(LINGER_MS), "--fencing", fencing]
    return Workload(
        bootstrap, topic, directory, producers=2, consumers=2, keys=400, rate=1500,
        epoch_topic=epochs, registry_topic=registry,
        producer_options=[*options, "--delivery-timeout-ms", str(delivery_ms)], **kw,
    )  # fmt: skip


@contextmanager
def _paused_while_growing(
    kafka: KafkaHandle, grow: Expansions, topic: str, workload: Workload
) -> Iterator[subprocess.Popen[str]]:
    """Producer 0 stopped (SIGSTOP) with records queued, and the topic growing 4 -> 8; after the
    caller's steps, traffic by the new count, then the producers stop (producer 0 woken first)."""
    paused = workload.producers[0]
    try:
        await_records(kafka.bootstrap, topic, 4, 3000)
        paused.send_signal(signal.SIGSTOP)
        grow.create("grow", topic, 8, fenceTimeoutSeconds=60)
        yield paused
        await_records(kafka.bootstrap, topic, 8, 3000)
    finally:
        paused.send_signal(signal.SIGCONT)
        workload.stop_producers()


def _judge(kafka: KafkaHandle, topic: str, epochs: str, workload: Workload, directory: Path) -> None:
    """Every verdict on what reached Kafka: the independent verifier, a fresh GatedConsumer group
    (no key out of order, every acknowledged record processed), a plain consumer (the control)."""
    read = read_topic(kafka.config(), topic, layout=RECORDS)
    records = read.records
    stored = check_topic(topic, records, read_epochs(kafka.config(), topic, epochs))
    print("verifier:", stored.summary(), stored.examples)
    assert read.unreadable == 0 and stored.duplicates == 0
    assert stored.order_violations == 0 and stored.misplaced == 0, stored.examples
    acknowledged = set(read_acknowledged(workload.delivered_paths()))
    assert acknowledged <= {(r.key, r.seq) for r in records}, "an acknowledged record is not in Kafka"

    workload.start_consumers()  # a group of its own, from the beginning of the topic
    assert workload.drain(len(acknowledged), timeout=90), workload.why_not_drained(len(acknowledged))
    verdict = workload.stop()
    print("gated consumers:", verdict.summary(), verdict.examples)
    assert verdict.order_violations == 0, verdict.examples
    processed = {(r.key, r.seq) for r in _processed(workload)}
    assert acknowledged <= processed

    plain = _plain_order_violations(records)
    print("plain consumer (control): order violations", plain)
    assert plain > 0, "the control must show that reading without the gate reorders keys"


def _processed(workload: Workload) -> Iterator[Processed]:
    for index in range(len(workload.consumers)):
        yield from read_processed(workload.processed_path(index))


def _plain_order_violations(records: list[StoredRecord]) -> int:
    """A plain consumer's reading of the topic, checked per key in the order it hands records out.
    Without a gate any interleaving of partitions is possible; this one reads the newest partitions
    first (as a consumer assigned them first may), so that the control fails the same way on every
    run instead of by the luck of fetch order."""
    check = KeyOrder()
    for record in sorted(records, key=lambda r: (-r.partition, r.offset)):
        check.add(record.key, record.seq)
    return check.order_violations


def _delivery_failures(directory: Path) -> list[str]:
    return [
        line
        for path in directory.glob("producer-*.err")
        for line in path.read_text().splitlines()
        if line.startswith("delivery of") and "failed" in line  # the application's callback said so
    ]


@pytest.mark.parametrize("fencing", ["broker", "lease"])
def test_a_producer_paused_past_its_session_lands_nothing_after_the_thresholds(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    expansions: tuple[Expansions, OperatorProcess],
    tmp_path: Path,
    fencing: str,
) -> None:
    """SIGSTOP with 2 s of records queued while the topic grows 4 -> 8; SIGCONT once the expansion
    completed. broker: Kafka fenced the paused producer at once (no wait for its clocks); on
    waking its aborted records went again by the new count, none lost. lease: the fence waited out
    its session and delivery timeout (6 s), so on waking librdkafka failed its queued records (the
    application's callbacks say so) instead of sending them by the old count. Either way it
    produced on with the new count."""
    grow, _ = expansions
    epochs, _ = log_topics
    topic = kafka.create_topic(4)
    workload = _workload(
        kafka.bootstrap, topic, tmp_path, log_topics, delivery_ms=6000, fencing=fencing
    ).start_producers()
    with _paused_while_growing(kafka, grow, topic, workload) as paused:
        status = grow.wait_phase("grow", "Completed", 90)
        assert (status["fromPartitions"], status["toPartitions"]) == (4, 8)
        if fencing == "broker":
            assert status.get("fencedThroughKafka") == ["scenario-producer-0"], status
            assert not kube.events("WaitingForSilentProducers"), "Kafka fenced it: nothing to wait out"
        else:
            waited = kube.events("WaitingForSilentProducers")
            assert any("scenario-producer-0" in (e.message or "") for e in waited), [
                e.message for e in waited
            ]
        paused.send_signal(signal.SIGCONT)
    failed = _delivery_failures(tmp_path)
    print(f"{len(failed)} queued records failed on waking, e.g. {failed[:1]}")
    if fencing == "broker":
        assert not failed, failed[:3]
    else:
        assert failed and all("timed out" in line for line in failed), failed[:3]
    woken = read_acknowledged([workload.delivered_path(0)]).values()
    assert any(int(where.split("@")[0][1:]) >= 4 for where in woken), (
        "the woken producer wrote by the new count"
    )
    _judge(kafka, topic, epochs, workload, tmp_path)


def test_a_producer_that_wakes_while_the_fence_waits_for_it_is_fenced_before_the_thresholds(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    expansions: tuple[Expansions, OperatorProcess],
    tmp_path: Path,
) -> None:
    """fencing=lease, paused past its session but not past its delivery timeout (15 s): it wakes
    while the fence waits for it, sends what it had queued, re-reads the epoch log (fencing),
    acknowledges once those records are written, and only then are the thresholds read. Nothing
    of it is lost. (With fencing=broker nothing waits for it: the test above.)"""
    grow, _ = expansions
    epochs, _ = log_topics
    topic = kafka.create_topic(4)
    workload = _workload(
        kafka.bootstrap, topic, tmp_path, log_topics, delivery_ms=15_000, fencing="lease"
    ).start_producers()
    with _paused_while_growing(kafka, grow, topic, workload) as paused:
        wait_for(lambda: kube.events("WaitingForSilentProducers"), 60, "the fence to wait for the paused one")
        paused.send_signal(signal.SIGCONT)
        grow.wait_phase("grow", "Completed", 90)
    assert not _delivery_failures(tmp_path), _delivery_failures(tmp_path)[:3]
    _judge(kafka, topic, epochs, workload, tmp_path)


@pytest.mark.parametrize("fencing", ["broker", "lease"])
def test_a_producer_whose_produce_requests_are_held_past_its_session_lands_nothing_after_the_thresholds(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
    tmp_path: Path,
    fencing: str,
) -> None:
    """The fault proxy holds every Produce request of one producer (its records and its liveness
    reports) for 6 s, twice its session, while the topic grows: the operator judges it gone.
    broker: Kafka fences it at once; the held requests reach the broker after that and are
    refused, and the producer sends them again by the new count. lease: the operator waits until
    what it sent can no longer land (session + 10 s delivery timeout); the held records reach the
    broker before the thresholds are read. Either way none is lost. The other producer and the
    operator reach the broker directly."""
    epochs, _ = log_topics
    operator = operator_process()
    operator.bootstrap = kafka.direct_bootstrap
    operator.start()
    grow = Expansions(kube.custom, kube.namespace)
    topic = kafka.create_topic(4)
    workload = _workload(
        kafka.direct_bootstrap,
        topic,
        tmp_path,
        log_topics,
        delivery_ms=10_000,
        fencing=fencing,
        producer_bootstraps=[kafka.bootstrap],
    ).start_producers()
    try:
        await_records(kafka.bootstrap, topic, 4, 3000)
        held = kafka.faults.add(Fault(api="Produce", delay=2 * SESSION, duration=2 * SESSION))
        grow.create("grow", topic, 8, fenceTimeoutSeconds=60)
        grow.wait_phase("grow", "Completed", 90)
        assert held.hits > 0
        await_records(kafka.bootstrap, topic, 8, 3000)
    finally:
        workload.stop_producers()
        operator.stop()
    assert not _delivery_failures(tmp_path), _delivery_failures(tmp_path)[:3]
    _judge(kafka, topic, epochs, workload, tmp_path)
