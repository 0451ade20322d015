"""A producer whose clocks do not count its pause, as a paused virtual machine's do not (issue 42).

A KVM guest that is paused counts the pause neither on CLOCK_MONOTONIC nor (until NTP steps it)
on CLOCK_REALTIME. On resume a lease-mode OrderedProducer finds its lease still valid and
librdkafka finds its queued records not yet timed out: they are sent by the old partition count
after the thresholds. The issue found 3,619 such records after a 41 s pause (linger 2 s, 4 -> 8
partitions); the same run with clocks that count the pause landed none
(``test_paused_producer.py``). Here the producer runs with the harness's frozen clock preloaded
(``ordo_testbed.frozen_clock``), stopped while the topic grows and woken with its clocks moved back
by the pause.

First, the frozen clock itself: Python's and librdkafka's clocks and timed waits in a process
under it do not count a hidden pause, and do count one that is not hidden.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ordo_testbed.frozen_clock import FrozenClock
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions
from ordo_testbed.stale_writers import ProducerUnderTest, judge

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

# -- the frozen clock, probed ------------------------------------------------------------------

_PROBE = r"""
import sys, threading, time
from confluent_kafka import Producer

start = time.monotonic()
failed = []
producer = Producer({"bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": 3000, "log_level": 0})
producer.produce("t", b"v", on_delivery=lambda error, message: failed.append(time.monotonic() - start))
print("ready", flush=True)
tick = threading.Event()
while not failed:
    producer.poll(0.05)  # librdkafka's condition variables (C11 cnd_timedwait)
    tick.wait(0.05)  # Python's lock waits (sem_clockwait)
    print(f"tick {time.monotonic() - start:.3f} {time.time():.3f}", flush=True)
print(f"failed {failed[0]:.3f}", flush=True)
"""
PAUSE = 3.5


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks of 10 ms


def _probe(clock: FrozenClock, hide: bool) -> tuple[float, float, float, float]:
    """The probe stopped for PAUSE after its first tick: (how far its monotonic clock moved across
    the pause, and its wall clock; seconds from waking until librdkafka failed the record, 3 s
    after it was queued by the process's clock; CPU seconds it spent from waking until then)."""
    process = subprocess.Popen(
        [sys.executable, "-c", _PROBE],
        stdout=subprocess.PIPE,
        text=True,
        env={**_env(), **clock.environment()},
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        before = process.stdout.readline().split()
        clock.stop(process)
        time.sleep(PAUSE)  # the pause itself: what the clocks must not count
        cpu = _cpu_seconds(process.pid)
        clock.resume(process, hide=hide)
        woke = time.monotonic()
        lines = [line.split() for line in process.stdout]
        failed_after = time.monotonic() - woke
        cpu = _cpu_seconds(process.pid) - cpu
    finally:
        process.kill()
        process.wait()
    ticks = [line for line in lines if line[0] == "tick"]
    assert lines[-1][0] == "failed" and ticks, lines[-3:]
    moved = float(ticks[0][1]) - float(before[1]), float(ticks[0][2]) - float(before[2])
    return moved[0], moved[1], failed_after, cpu


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def test_a_hidden_pause_is_not_counted_by_python_nor_librdkafka_and_nothing_spins(tmp_path: Path) -> None:
    """Under the frozen clock, across a hidden pause of 3.5 s: time.monotonic() and time.time()
    move by less than a second; librdkafka fails a record 3 s after it was queued by the process's
    clock, so well after waking; no thread spins (libfaketime left Python's Event.wait hanging
    and librdkafka's threads spinning, and under load read a clock by the old offset on waking).
    Not hidden (the control, same preload), the clocks count the pause and librdkafka fails the
    record as it wakes."""
    mono, wall, failed_after, cpu = _probe(FrozenClock(tmp_path, "hidden"), hide=True)
    print(
        f"hidden: monotonic +{mono:.2f}s, wall +{wall:.2f}s, failed {failed_after:.2f}s after waking, "
        f"cpu {cpu:.2f}s"
    )
    assert mono < 1.0 and wall < 1.0
    assert failed_after > 1.0  # what was left of its 3 s when it stopped (about 2.9 s)
    assert cpu < 0.5 * failed_after

    mono, wall, failed_after, cpu = _probe(FrozenClock(tmp_path, "counted"), hide=False)
    print(f"counted: monotonic +{mono:.2f}s, wall +{wall:.2f}s, failed {failed_after:.2f}s after waking")
    assert mono > PAUSE - 0.1 and wall > PAUSE - 0.1
    assert failed_after < 1.0


# -- a producer paused past every bound, its clocks frozen --------------------------------------

SESSION, LINGER, DELIVERY = 3.0, 2.0, 4.0  # the producer's session, linger.ms, message.timeout.ms
MARGIN = 1.0  # the operator's ORDO_STRAGGLER_MARGIN_SECONDS (5 s by default): a shorter test
OPTIONS = [
    "--session-timeout", str(SESSION), "--linger-ms", str(int(LINGER * 1000)),
    "--delivery-timeout-ms", str(int(DELIVERY * 1000)),
]  # fmt: skip
LEASE_BOUND = SESSION + DELIVERY + MARGIN
"""How long the operator waits for a silent lease-mode producer after its last report."""

# lease mode, and the default mode (None: broker, ordo's own transactions)
MODES = [pytest.param("lease", id="lease"), pytest.param(None, id="default")]


@pytest.fixture
def grow(kube: Kube, operator_process: Callable[..., OperatorProcess]) -> Iterator[Expansions]:
    operator = operator_process(ORDO_STRAGGLER_MARGIN_SECONDS=str(MARGIN)).start()
    yield Expansions(kube.custom, kube.namespace)
    operator.stop()


@pytest.mark.parametrize("fencing", MODES)
def test_a_producer_whose_clocks_do_not_count_its_pause(
    fencing: str | None, kafka: KafkaHandle, log_topics: tuple[str, str], grow: Expansions, tmp_path: Path
) -> None:
    """The issue's case, shortened: 1,500 records/s, linger 2 s, session 3 s, delivery timeout
    4 s; stopped with records queued while the topic grows 4 -> 8, woken once the expansion
    completed and the pause is past the lease mode's bound (session + delivery timeout + margin),
    its clocks moved back by the pause.

    Lease mode (``fencing="lease"``): the lease still holds and librdkafka's queue has not timed
    out, so records land by the old count after the thresholds: the test reaches past the lease's
    bound. Default mode (broker): none lands misplaced and none is lost, whatever its clocks say."""
    epochs, _ = log_topics
    topic = kafka.create_topic(4)
    clock = FrozenClock(tmp_path)
    producer = ProducerUnderTest(
        kafka.bootstrap,
        topic,
        tmp_path,
        log_topics,
        fencing=fencing,
        options=OPTIONS,
        env=clock.environment(),
    )
    try:
        producer.await_written(kafka.bootstrap, 4, 1500)  # returns as a linger's batches land
        time.sleep(LINGER * 0.75)  # when to pause: with 1.5 s of records queued, not just after a send
        clock.stop(producer.process)
        grow.create("grow", topic, 8, fenceTimeoutSeconds=60)
        status = grow.wait_phase("grow", "Completed", 90)
        assert (status["fromPartitions"], status["toPartitions"]) == (4, 8)
        time.sleep(max(0.0, LEASE_BOUND + 1 - clock.stopped_for()))  # the pause's length: the fault
        paused = clock.resume(producer.process)
        producer.await_written(kafka.bootstrap, 8, 1500)  # it writes on, by the new count
    finally:
        producer.stop()
    verdicts = judge(kafka.config(), topic, epochs, producer)
    stored, gated = verdicts.stored, verdicts.gated
    print(
        f"{fencing or 'default'}: paused {paused:.1f}s, hidden from its clocks; "
        f"verifier: {stored.summary()}; delivery failures {len(producer.failures())}; "
        f"fresh GatedConsumer group: {gated.summary()}"
    )
    assert not verdicts.not_in_kafka, verdicts.not_in_kafka[:5]
    assert gated.order_violations == 0, gated.examples
    if fencing == "lease":
        assert stored.misplaced > 0, "the frozen clock must take a lease-mode producer past its bound"
        assert gated.misplaced, "the gated readers must recognise misplaced records, not deliver them"
        return
    assert stored.misplaced == 0 and stored.order_violations == 0, stored.examples
    assert stored.duplicates == 0 and stored.missing == 0, stored.summary()
    assert not producer.failures(), producer.failures()[:3]
    assert not gated.misplaced and gated.delivered == stored.records
