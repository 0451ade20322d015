"""Ordered producers simulated through the producer registry alone, for counts no producer
processes fit on one machine: each is a report in ``__ordo_producers`` written as
``OrderedProducer`` writes it (key: its id; value: a ``ProducerReport``), every session / 3 (its
heartbeat), and acknowledging a fence as soon as the epoch log shows it (a producer with nothing
in flight). One Kafka producer writes for all of them. Each fence's stall is recorded as a real
producer would live it: from the fence seen (it stops producing) to the next active epoch seen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Producer

from ordo.control_topics import DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC
from ordo.epochs import EpochHistory, EpochState
from ordo.epochs.liveness import ProducerReport
from ordo.epochs.log import EpochLog

__all__ = ["SimulatedProducers"]


class SimulatedProducers:
    """``count`` producers of ``topic``, reporting from construction until :meth:`close`."""

    def __init__(
        self, config: Mapping[str, Any], topic: str, count: int, session_seconds: float = 10.0
    ) -> None:
        self.topic, self.session = topic, session_seconds
        self.ids = [f"sim-{topic}-{i:04d}" for i in range(count)]
        self.epoch, self.acked = 0, -1
        self.records = 0  # registry records written, and their bytes
        self.bytes = 0
        self.acks_flushed: dict[int, float] = {}  # fence epoch -> wall time every ack was written
        self.fenced_at: dict[int, float] = {}  # fence epoch -> wall time the fence was seen
        self.resumed_at: dict[int, float] = {}  # epoch -> wall time it was seen active
        self._producer = Producer({**config, "linger.ms": 5})
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._log = EpochLog(config, DEFAULT_EPOCH_TOPIC)
        self._log.catch_up(30)
        self._seen(self._log.history(topic))
        self.report_all()
        self._unsubscribe = self._log.subscribe(self._seen)
        self._heartbeat = threading.Thread(target=self._beat, name="sim-heartbeat", daemon=True)
        self._heartbeat.start()

    def report_all(self) -> None:
        """Every producer's report, as its heartbeat writes it."""
        with self._lock:
            epoch, acked = self.epoch, self.acked
            now = int(time.time() * 1000)
            for producer_id in self.ids:
                report = ProducerReport(
                    producer_id=producer_id,
                    topics=(self.topic,),
                    epochs={self.topic: epoch},
                    fenced={self.topic: acked} if acked >= 0 else {},
                    session_timeout_ms=int(self.session * 1000),
                    reported_at_ms=now,
                )
                value = report.model_dump_json().encode()
                self._producer.produce(DEFAULT_REGISTRY_TOPIC, key=producer_id.encode(), value=value)
                self.records += 1
                self.bytes += len(value) + len(producer_id)
            self._producer.flush(30)

    def _seen(self, history: EpochHistory | None) -> None:
        """A fence in the epoch log: every producer acknowledges it at once; a new active epoch:
        they produce with it."""
        if history is None or history.topic != self.topic:
            return
        current, now = history.current, time.time()
        with self._lock:
            self.epoch = history.active.epoch
            self.resumed_at.setdefault(self.epoch, now)
            fence = current.epoch if current.state == EpochState.FENCING else None
            new_fence = fence is not None and fence > self.acked
            if new_fence:
                assert fence is not None
                self.acked = fence
                self.fenced_at[fence] = now
        if new_fence:
            self.report_all()
            assert fence is not None
            self.acks_flushed[fence] = time.time()

    def stall(self, epoch: int) -> float:
        """Seconds a producer of this fence stood still: fence seen to ``epoch`` seen active."""
        return self.resumed_at[epoch] - self.fenced_at[epoch]

    def _beat(self) -> None:
        while not self._stop.wait(self.session / 3):
            self.report_all()

    def close(self) -> None:
        """Closed producers leave the registry at once (``closed``), as ``OrderedProducer.close``."""
        self._stop.set()
        self._heartbeat.join(10)
        self._unsubscribe()
        self._log.close()
        for producer_id in self.ids:
            report = ProducerReport(producer_id=producer_id, topics=(self.topic,), session_timeout_ms=1000,
                                    reported_at_ms=int(time.time() * 1000), closed=True)  # fmt: skip
            self._producer.produce(
                DEFAULT_REGISTRY_TOPIC, key=producer_id.encode(), value=report.model_dump_json()
            )
        self._producer.flush(30)
