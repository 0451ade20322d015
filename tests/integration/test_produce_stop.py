"""Two more ways a lease-mode producer's record outlives its bounds (issue 42), with the fencing
mode as a parameter: lease mode shows the hole, the default mode (broker) must not.

- **A stop between the lease check and the hand-off to librdkafka.** ``produce()`` checks the
  lease, chooses the partition by the count it knows, then hands the record over; a process
  stopped between the two queues the record on waking with a fresh delivery timeout, by the old
  count. The stop is the test's own (``ordo_testbed.hooked``): a wrapper of librdkafka's
  ``Producer.produce`` that stops the process from inside, so it lands in that window every
  time and the SDK's hot path carries no hook (a SIGSTOP from outside lands there by chance).
- **A Produce request held longer than the delivery timeout** by the fault proxy: librdkafka
  gives its records up (the application is told they failed) while the request still reaches
  the broker, after the thresholds.

Judged from what reached Kafka: the independent verifier and a fresh GatedConsumer group
(``ordo_testbed.stale_writers``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ordo.partitioners import murmur2_partition
from ordo_testbed.kafka import Fault
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions
from ordo_testbed.stale_writers import ProducerUnderTest, Verdicts, judge

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

SESSION, LINGER, DELIVERY = 3.0, 2.0, 4.0  # the producer's session, linger.ms, message.timeout.ms
MARGIN = 1.0  # the operator's ORDO_STRAGGLER_MARGIN_SECONDS (5 s by default): a shorter test
OPTIONS = [
    "--session-timeout", str(SESSION), "--linger-ms", str(int(LINGER * 1000)),
    "--delivery-timeout-ms", str(int(DELIVERY * 1000)),
]  # fmt: skip
LEASE_BOUND = SESSION + DELIVERY + MARGIN
"""How long the operator waits for a silent lease-mode producer after its last report."""
HOLD = LEASE_BOUND + 6  # past that wait, the fence and the thresholds, on a loaded machine too

# lease mode, and the default mode (None: broker, ordo's own transactions)
MODES = [pytest.param("lease", id="lease"), pytest.param(None, id="default")]


@pytest.fixture
def operator(operator_process: Callable[..., OperatorProcess]) -> OperatorProcess:
    """Made, not started: a test may point it past the fault proxy first."""
    return operator_process(ORDO_STRAGGLER_MARGIN_SECONDS=str(MARGIN))


@pytest.fixture
def grow(kube: Kube) -> Expansions:
    return Expansions(kube.custom, kube.namespace)


def _expand(grow: Expansions, topic: str) -> None:
    grow.create("grow", topic, 8, fenceTimeoutSeconds=60)
    status = grow.wait_phase("grow", "Completed", 90)
    assert (status["fromPartitions"], status["toPartitions"]) == (4, 8)


def _print(fencing: str | None, what: str, producer: ProducerUnderTest, verdicts: Verdicts) -> None:
    print(
        f"{fencing or 'default'}: {what}; verifier: {verdicts.stored.summary()}; delivery failures "
        f"{len(producer.failures())}; fresh GatedConsumer group: {verdicts.gated.summary()}"
    )


def _assert_nothing_misplaced_nor_lost(producer: ProducerUnderTest, verdicts: Verdicts) -> None:
    stored, gated = verdicts.stored, verdicts.gated
    assert stored.misplaced == 0 and stored.order_violations == 0, stored.examples
    assert stored.duplicates == 0 and stored.missing == 0, stored.summary()
    assert not verdicts.not_in_kafka, verdicts.not_in_kafka[:5]
    assert not producer.failures(), producer.failures()[:3]
    assert not gated.misplaced and gated.order_violations == 0, gated.examples
    assert gated.delivered == stored.records


@pytest.mark.parametrize("fencing", MODES)
def test_a_producer_stopped_between_its_lease_check_and_the_hand_off(
    fencing: str | None,
    kafka: KafkaHandle,
    log_topics: tuple[str, str],
    operator: OperatorProcess,
    grow: Expansions,
    tmp_path: Path,
) -> None:
    """Stopped inside produce(), after the lease check, for a record of a key that 8 partitions
    place elsewhere, while the topic grows 4 -> 8; woken once the expansion completed and the
    pause is past the lease mode's bound. Its clocks count the pause: what it had queued fails.

    Lease mode: that one record is handed over on waking, by the old count, and lands after the
    threshold (one record per thread in the window: the bound docs/reliability.md states).
    Default mode (broker): it lands nowhere by the old count, and nothing is lost."""
    epochs, _ = log_topics
    operator.start()
    topic = kafka.create_topic(4)
    producer = ProducerUnderTest(
        kafka.bootstrap, topic, tmp_path, log_topics, fencing=fencing, options=OPTIONS, stop_in_produce=True,
        moved_by=8,
    )  # fmt: skip
    try:
        producer.await_written(kafka.bootstrap, 4, 1500)
        partition, key, seq = producer.stop_inside_produce()
        stopped = time.monotonic()
        _expand(grow, topic)
        time.sleep(max(0.0, LEASE_BOUND + 1 - (time.monotonic() - stopped)))  # the pause's length: the fault
        paused = time.monotonic() - stopped
        producer.resume()
        producer.await_written(kafka.bootstrap, 8, 1500)  # it writes on, by the new count
    finally:
        producer.stop()
    verdicts = judge(kafka.config(), topic, epochs, producer)
    where = verdicts.where(key, seq)
    _print(
        fencing,
        f"{key} #{seq} stopped on its way to p{partition} for {paused:.1f}s, in Kafka at {where}",
        producer,
        verdicts,
    )
    assert len(where) == 1, f"{key} #{seq} must be in Kafka once: {where}"
    if fencing == "lease":
        ((landed, offset),) = where
        assert landed == partition and verdicts.after_threshold(landed, offset), (
            f"the stopped record must land by the old count after p{partition}'s threshold: {where}"
        )
        assert verdicts.stored.misplaced >= 1
        assert (key, seq) in {(k, s) for k, s, _, _ in verdicts.gated.misplaced}, verdicts.gated.summary()
        assert verdicts.gated.order_violations == 0, verdicts.gated.examples
        return
    assert where[0][0] == murmur2_partition(key.encode(), 8), f"placed by the new count: {where}"
    _assert_nothing_misplaced_nor_lost(producer, verdicts)


@pytest.mark.parametrize("fencing", MODES)
def test_a_produce_request_held_longer_than_the_delivery_timeout(
    fencing: str | None,
    kafka: KafkaHandle,
    log_topics: tuple[str, str],
    operator: OperatorProcess,
    grow: Expansions,
    tmp_path: Path,
) -> None:
    """The fault proxy holds every Produce request of the producer (its records and its liveness
    reports) for HOLD seconds, past session + delivery timeout + margin, while the topic grows
    4 -> 8; the operator reaches the broker directly. librdkafka gives the held records up at the
    delivery timeout (the application is told they failed) and bumps its idempotent epoch, but
    the first held request still reaches the broker before anything of the new epoch.

    Lease mode: the operator judged the producer silent, waited session + delivery timeout +
    margin and went ahead; the held records land by the old count after the thresholds.
    Default mode (broker): the operator fenced it through the broker, which refuses the held
    request; none lands misplaced and none is lost."""
    epochs, _ = log_topics
    operator.bootstrap = kafka.direct_bootstrap
    operator.start()
    topic = kafka.create_topic(4)
    producer = ProducerUnderTest(
        kafka.bootstrap, topic, tmp_path, log_topics, fencing=fencing, options=OPTIONS
    )
    try:
        producer.await_written(kafka.bootstrap, 4, 1500)
        # every request arriving for the first HOLD + 2 linger seconds: what the producer sends
        # after the first held one is held at least as long, so nothing of it arrives earlier
        held = kafka.faults.add(Fault(api="Produce", delay=HOLD, duration=HOLD + 2 * LINGER))
        _expand(grow, topic)
        assert held.hits > 0
        producer.await_written(kafka.bootstrap, 8, 1500, timeout=90)  # it writes on, by the new count
    finally:
        kafka.faults.clear()
        producer.stop()
    verdicts = judge(kafka.config(), topic, epochs, producer)
    _print(fencing, f"its Produce requests held {HOLD:g}s", producer, verdicts)
    if fencing == "lease":
        assert verdicts.stored.misplaced > 0, (
            "the held request must take a lease-mode producer past its bound"
        )
        assert verdicts.gated.misplaced, (
            "the gated readers must recognise misplaced records, not deliver them"
        )
        assert verdicts.gated.order_violations == 0, verdicts.gated.examples
        return
    _assert_nothing_misplaced_nor_lost(producer, verdicts)
