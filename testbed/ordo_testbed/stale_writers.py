"""What the tests of writers that outlive their bounds share (issue 42: a frozen clock, a stop
inside ``produce()``, a Produce request held past the delivery timeout): the producer under test
as a process, and the verdicts on what reached Kafka.

- :class:`ProducerUnderTest`: the sandbox's keyed producer (``ordo_sandbox.scenario.producer``,
  numbered records, "key seq partition offset" per delivered record when it stops) with an
  OrderedProducer fencing mode, optionally under :mod:`ordo_testbed.hooked`'s stop inside
  ``produce()``, and more environment (a frozen clock's).
- :func:`judge`: the independent verifier (``ordo.verify``: records placed by an old count after
  the thresholds are ``misplaced``; every acknowledged record in Kafka) and a fresh GatedConsumer
  group reading the topic from the beginning (what it delivered, in which order, and what it
  recognised as misplaced instead of delivering).
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Message

from ordo.gated_consumer import GatedConsumer
from ordo.verify import KeyOrder
from ordo.verify.topic import ActiveEpoch, StoredRecord, TopicVerdict, check_topic, read_epochs, read_topic
from ordo_testbed.frozen_clock import process_state
from ordo_testbed.hooked import hooked_argv
from ordo_testbed.kafka.testing import records_in
from ordo_testbed.records import RECORDS, decode_record
from ordo_testbed.waiting import wait_for

__all__ = ["GatedReading", "ProducerUnderTest", "Verdicts", "judge"]

PROGRAM = "ordo_sandbox.scenario.producer"


class ProducerUnderTest:
    """One keyed producer process (numbered ``k<id>-<i>`` keys, ``rate`` records a second)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        directory: Path,
        log_topics: tuple[str, str],
        *,
        fencing: str | None,
        options: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        stop_in_produce: bool = False,
        moved_by: int | None = None,
        index: int = 0,
        keys: int = 400,
        rate: float = 1500.0,
    ) -> None:
        """``fencing``: OrderedProducer's mode (None: its default); ``options``: more of the
        producer program's (``--session-timeout``, ``--linger-ms``, ``--delivery-timeout-ms``);
        ``stop_in_produce``: SIGUSR2 (:meth:`stop_inside_produce`) stops it inside librdkafka's
        produce, for a key ``moved_by`` partitions move if given."""
        self.topic = topic
        self.delivered_path = directory / f"delivered-{index}.txt"
        self.errors_path = directory / f"producer-{index}.err"
        epochs, registry = log_topics
        argv = [
            "--bootstrap", bootstrap, "--topic", topic, "--epoch-topic", epochs, "--registry-topic", registry,
            "--id", str(index), "--keys", str(keys), "--rate", str(rate), "--out", str(self.delivered_path),
            *options,
        ]  # fmt: skip
        argv += [] if fencing is None else ["--fencing", fencing]  # None: the program's default
        command = hooked_argv(
            PROGRAM, argv, stop_in_produce=topic if stop_in_produce else None, moved_by=moved_by
        )
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=self.errors_path.open("a"),
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            self.process.kill()
            raise RuntimeError(f"the producer did not start: {line!r}\n{self.errors()}")

    def stop_inside_produce(self, timeout: float = 20.0) -> tuple[int, str, int]:
        """Arm the stop (SIGUSR2) and wait until the process stopped itself inside produce();
        returns the record it was handing over: (partition, key, seq)."""
        self.process.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(r"stopped inside produce\(\): p(\d+) (b.*)", self.errors())
            if found and process_state(self.process.pid) == "T":
                record = decode_record(ast.literal_eval(found.group(2)))
                assert record is not None, found.group(0)
                return int(found.group(1)), record[0], record[1]
            time.sleep(0.05)  # polling the process's stderr and state
        raise AssertionError(
            f"the producer did not stop inside produce() within {timeout}s:\n{self.errors()}"
        )

    def await_written(self, bootstrap: str, partitions: int, more: int, timeout: float = 60.0) -> None:
        """Wait until the topic's partitions 0..n-1 hold ``more`` records beyond what they hold
        now (traffic, not time); AssertionError at once, with its last words, if it exited."""
        wanted = records_in(bootstrap, self.topic, partitions) + more

        def written() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"the producer exited ({self.process.returncode}):\n{self.errors()[-3000:]}"
                )
            return records_in(bootstrap, self.topic, partitions) >= wanted

        wait_for(written, timeout, f"{more} more records")

    def resume(self) -> None:
        """SIGCONT: it goes on from where it stopped (inside produce(), the record handed over)."""
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """SIGCONT (if stopped) and SIGTERM: the program flushes (60 s at most) and writes what was
        delivered; its stacks go to its stderr file if it does not end within 90 s."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                self.process.send_signal(signal.SIGUSR1)
                time.sleep(1)  # for the stack dump to be written
                self.process.kill()
                self.process.wait(timeout=10)
                raise AssertionError(f"the producer did not stop:\n{self.errors()}") from None

    def errors(self) -> str:
        return self.errors_path.read_text(errors="replace") if self.errors_path.exists() else ""

    def failures(self) -> list[str]:
        """The delivery failures the application was told of (the program's stderr lines)."""
        return [line for line in self.errors().splitlines() if line.startswith("delivery of")]

    def acknowledged(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(key, seq) → (partition, offset) of each record the broker acknowledged (after stop)."""
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for line in self.delivered_path.read_text().splitlines():
            key, seq, partition, offset = line.split()
            out[(key, int(seq))] = (int(partition), int(offset))
        return out


@dataclass
class GatedReading:
    """What a fresh GatedConsumer group did with the whole topic."""

    delivered: int = 0
    order_violations: int = 0
    misplaced: list[tuple[str, int, int, int]] = field(default_factory=list)
    """(key, seq, partition, offset) of each record it recognised as misplaced (not delivered)."""
    examples: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"delivered {self.delivered}, order violations {self.order_violations}, "
            f"recognised as misplaced {len(self.misplaced)}"
        )


@dataclass
class Verdicts:
    stored: TopicVerdict
    records: list[StoredRecord]
    epochs: list[ActiveEpoch]
    gated: GatedReading
    not_in_kafka: list[tuple[str, int]]
    """Records the broker acknowledged that a read_committed reader does not find."""

    def after_threshold(self, partition: int, offset: int) -> bool:
        """Whether ``offset`` of old ``partition`` lies past the last expansion's threshold."""
        last = self.epochs[-1]
        return partition in last.thresholds and offset >= last.thresholds[partition]

    def where(self, key: str, seq: int) -> list[tuple[int, int]]:
        return [(r.partition, r.offset) for r in self.records if r.key == key and r.seq == seq]


def judge(
    kafka_config: Mapping[str, Any],
    topic: str,
    epoch_topic: str,
    producer: ProducerUnderTest,
    timeout: float = 90,
) -> Verdicts:
    """Every verdict on what reached Kafka once ``producer`` stopped (see the module's doc)."""
    read = read_topic(kafka_config, topic, layout=RECORDS)
    assert read.unreadable == 0, read.samples
    epochs = read_epochs(kafka_config, topic, epoch_topic)
    stored = check_topic(topic, read.records, epochs)
    in_kafka = {(r.key, r.seq) for r in read.records}
    not_in_kafka = sorted(set(producer.acknowledged()) - in_kafka)
    gated = _read_gated(kafka_config, topic, epoch_topic, len(read.records), timeout)
    return Verdicts(stored, read.records, epochs, gated, not_in_kafka)


def _read_gated(
    kafka_config: Mapping[str, Any], topic: str, epoch_topic: str, total: int, timeout: float
) -> GatedReading:
    """A GatedConsumer of a new group reads ``topic`` from the beginning until it delivered or
    recognised ``total`` records (AssertionError after ``timeout``, saying how far it got)."""
    reading = GatedReading()
    order = KeyOrder()
    handed: list[Message] = []
    config = {**kafka_config, "group.id": f"judge-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"}
    consumer = GatedConsumer(config, [topic], epoch_topic=epoch_topic, on_misplaced=handed.extend)
    try:
        deadline = time.monotonic() + timeout
        while order.records + len(handed) < total:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"a fresh GatedConsumer group delivered {order.records} and recognised {len(handed)} "
                    f"as misplaced of {total} records in {timeout}s; closed gates: {consumer.closed_gates()}"
                )
            for message in consumer.consume(500, 0.2):
                if message.error() is not None:
                    continue
                record = decode_record(message.value())
                assert record is not None
                order.add(record[0], record[1], f"p{message.partition()}@{message.offset()}")
    finally:
        consumer.close()
    for message in handed:
        record = decode_record(message.value())
        assert record is not None
        reading.misplaced.append((record[0], record[1], message.partition() or 0, message.offset() or 0))
    reading.delivered = order.records
    reading.order_violations = order.order_violations
    reading.examples = order.examples
    return reading
