"""OrderedTopicExpansion as the producers and the topic grow (issue: scale): the operator on the
testbed expanding topics while simulated producers (``_registry_producers``: reports in
``__ordo_producers``, no processes) are registered for them.

- Producers: 64 -> 128 partitions with 10 -> 100 producers (``ORDO_SCALE=long``: to 1,000).
- Topic: 16 -> 32, 128 -> 256 and 1,024 -> 2,048 partitions with 100 producers (long: 1,000).

Per expansion:

- the fence wait the operator records (``status.fenceWaitSeconds``: from fencing to every live
  producer's acknowledgement read), and of it the operator's lag after the last
  acknowledgement was written;
- the whole expansion and its phases (the operator's ``ordo_expansion_phase_duration_seconds``:
  Creating = partitions created and served while producers write on, Fencing, Expanding = end
  offsets read, Publishing);
- the producer stall: from a producer seeing the fence to it seeing the new epoch active (the
  operator's ``status.pausedSeconds`` from its side);
- what the expansion writes to ``__ordo_producers``: one acknowledgement per producer (records,
  bytes), on top of the heartbeats (every producer every session / 3, ``OrderedProducer``'s
  pace: producers x 3 / session records per second).

One expansion runs first and is not counted: the operator's first one also opens its Kafka
clients and reads the control topics, a cost a running operator has paid long before.
"""

from __future__ import annotations

import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from ordo.epochs.log import ensure_log_topics
from ordo_testbed.kafka.broker import free_port
from ordo_testbed.members import api_client
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions
from ordo_testbed.waiting import wait_for

from ._plot import HERE
from ._registry_producers import SimulatedProducers
from ._result import Result
from ._testbed import full_testbed
from .scale_bench import LONG, growth

PRODUCERS = (10, 30, 100) + ((300, 1_000) if LONG else ())
FROM, TO = 64, 128
TOPIC_SIZES = (16, 128, 1_024)  # each doubled: to 2,048 partitions
SIZE_PRODUCERS = 1_000 if LONG else 100
PHASES = ("Creating", "Fencing", "Expanding", "Publishing")
SESSION = 10.0  # OrderedProducer's default session
NAMESPACE = "scale-expansions"
PNG = HERE / "scale_expansion_curves.png"


@dataclass(frozen=True)
class _Size:
    producers: int
    partitions: int  # before the expansion (doubled by it)
    fence_wait: float  # s, the operator's status.fenceWaitSeconds
    lag: float  # s from the last acknowledgement written to the operator's end of fencing
    duration: float  # s, the whole expansion (status.durationSeconds)
    phases: dict[str, float]  # phase -> s, the operator's own histogram
    stall: float  # s a producer stood still: fence seen to the new epoch seen
    ack_records: int
    ack_bytes: int

    def describe(self) -> str:
        phases = ", ".join(f"{p.lower()} {self.phases.get(p, 0.0):.2f}" for p in PHASES)
        return (
            f"fence wait {self.fence_wait:.2f} s (operator lag {self.lag:.2f} s), expansion "
            f"{self.duration:.2f} s ({phases}), producer stall {self.stall:.2f} s, "
            f"{self.ack_records} acknowledgements, {self.ack_bytes:,} B"
        )


class _Operator:
    """The operator process with its metrics served, to read each phase's time."""

    def __init__(self, kubeconfig: Path, bootstrap: str, log: Path) -> None:
        self.port = free_port()
        self.process = OperatorProcess(
            kubeconfig, bootstrap, namespaces=[NAMESPACE], log_path=log,
            env={"ORDO_METRICS_PORT": str(self.port)},
        )  # fmt: skip

    def start(self) -> None:
        self.process.start()
        wait_for(self._serving, 60, "the operator's metrics")

    def _serving(self) -> bool:
        try:
            self.phase_seconds()
        except OSError:
            return False
        return True

    def phase_seconds(self) -> dict[str, float]:
        """Every phase's total time so far (the histogram's sums)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        totals: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            if family.name == "ordo_expansion_phase_duration_seconds":
                for sample in family.samples:
                    if sample.name.endswith("_sum"):
                        totals[sample.labels["phase"]] = sample.value
        return totals


def _expand(
    bootstrap: str, expansions: Expansions, operator: _Operator, producers: int, partitions: int
) -> _Size:
    topic = f"grow-{partitions}-{producers}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(60)
    sim = SimulatedProducers({"bootstrap.servers": bootstrap}, topic, producers, SESSION)
    try:
        before_records, before_bytes = sim.records, sim.bytes
        before_phases = operator.phase_seconds()
        expansions.create(topic, topic, partitions * 2)
        status = expansions.wait_phase(topic, "Completed", 300)
        epoch = int(status["epoch"])
        fenced = _seconds(status["fencedAt"])
        lag = fenced + float(status["fenceWaitSeconds"]) - sim.acks_flushed[epoch]
        after_phases = operator.phase_seconds()
        phases = {p: after_phases.get(p, 0.0) - before_phases.get(p, 0.0) for p in PHASES}
        # the acknowledgements, without the heartbeats that fell in the same time
        size = (sim.bytes - before_bytes) / max(1, sim.records - before_records)
        return _Size(producers, partitions, float(status["fenceWaitSeconds"]), lag,
                     float(status["durationSeconds"]), phases, _stall(sim, epoch), producers,
                     round(size * producers))  # fmt: skip
    finally:
        sim.close()


def _stall(sim: SimulatedProducers, epoch: int) -> float:
    """The stall, once the producers' reader has seen the new epoch (it may lag the status)."""
    wait_for(lambda: epoch in sim.resumed_at, 30, f"the simulated producers to see epoch {epoch}")
    return sim.stall(epoch)


def _seconds(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def run() -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp, full_testbed(Path(tmp)) as (bootstrap, kubeconfig):
        ensure_log_topics(AdminClient({"bootstrap.servers": bootstrap}))
        api = api_client(kubeconfig)
        core: Any = kubernetes.client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        operator = _Operator(kubeconfig, bootstrap, Path(tmp) / "op.log")
        operator.start()
        expansions = Expansions(kubernetes.client.CustomObjectsApi(api), NAMESPACE)
        try:
            first = _expand(bootstrap, expansions, operator, PRODUCERS[0], 8)
            print(f"  first expansion after the operator started (not counted): {first.describe()}")
            sizes = _series(bootstrap, expansions, operator, [(n, FROM) for n in PRODUCERS])
            topics = _series(bootstrap, expansions, operator, [(SIZE_PRODUCERS, n) for n in TOPIC_SIZES])
        finally:
            operator.process.stop()
    _plot(sizes, topics)
    top, big = sizes[-1], topics[-1]
    counts = [s.producers for s in sizes]
    k = growth(counts, [s.fence_wait for s in sizes])
    k_topic = growth(TOPIC_SIZES, [s.duration for s in topics])
    label = f"{top.producers:,} simulated producers, {FROM} -> {TO} partitions"
    phases = ", ".join(f"{p.lower()} {big.phases.get(p, 0.0):.2f} s" for p in PHASES)
    return [
        Result.absolute(
            f"expansion {big.partitions:,} -> {big.partitions * 2:,} partitions, {big.producers:,} "
            f"simulated producers: producer stall, fence seen to new epoch seen (whole expansion "
            f"{big.duration:.2f} s: {phases}; growth in partitions O(n^{k_topic:.2f}))",
            big.stall,
            "s",
            "<= 10 s",
        ),
        Result.absolute(
            f"expansion fence wait seen by the operator, {label} (O(n^{k:.2f}); after the last "
            f"acknowledgement {top.lag:.2f} s; whole expansion {top.duration:.2f} s)",
            top.fence_wait,
            "s",
            "<= 5 s",
        ),
        Result.absolute(
            f"__ordo_producers per expansion: {top.ack_records:,} acknowledgements, {label} (and "
            f"{top.producers * 3 / SESSION:g} heartbeats/s in steady state, session {SESSION:g} s)",
            top.ack_bytes,
            "B",
        ),
    ]


def _series(
    bootstrap: str, expansions: Expansions, operator: _Operator, runs: list[tuple[int, int]]
) -> list[_Size]:
    sizes = []
    for producers, partitions in runs:
        sizes.append(_expand(bootstrap, expansions, operator, producers, partitions))
        print(f"  {producers:>5} producers, {partitions:>5} -> {partitions * 2:>5}: {sizes[-1].describe()}")
    return sizes


def _plot(sizes: list[_Size], topics: list[_Size]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = [s.producers for s in sizes]
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(15, 4.2))
    left.plot(counts, [s.fence_wait for s in sizes], marker="o", label="fence wait (operator's status)")
    left.plot(
        counts, [max(s.lag, 1e-3) for s in sizes], marker="o", label="of it, after the last acknowledgement"
    )
    left.plot(counts, [s.duration for s in sizes], marker="o", label="whole expansion")
    left.set(xscale="log", yscale="log", xlabel="registered producers", ylabel="s",
             title=f"expansion {FROM} -> {TO} partitions")  # fmt: skip
    left.plot(counts, [s.stall for s in sizes], marker="o", linestyle="--", label="producer stall")
    partitions = [s.partitions for s in topics]
    middle.plot(partitions, [s.duration for s in topics], marker="o", label="whole expansion")
    for phase in PHASES:
        middle.plot(partitions, [max(s.phases.get(phase, 0.0), 1e-3) for s in topics], marker=".",
                    label=phase.lower())  # fmt: skip
    middle.plot(partitions, [s.stall for s in topics], marker="o", linestyle="--", label="producer stall")
    middle.set(xscale="log", yscale="log", xlabel="partitions before (doubled)", ylabel="s",
               title=f"expansion n -> 2n, {topics[0].producers:,} producers")  # fmt: skip
    right.plot(
        counts, [s.ack_bytes / 1024 for s in sizes], marker="o", label="acknowledgements per expansion"
    )
    heartbeats = [s.producers * 3 / SESSION * s.ack_bytes / s.ack_records / 1024 for s in sizes]
    label = f"heartbeats per second (session {SESSION:g} s)"
    right.plot(counts, heartbeats, marker="o", linestyle="--", label=label)
    right.set(xscale="log", yscale="log", xlabel="registered producers", ylabel="KiB",
              title="__ordo_producers")  # fmt: skip
    for axes in (left, middle, right):
        axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(PNG, dpi=110)
    plt.close(figure)
