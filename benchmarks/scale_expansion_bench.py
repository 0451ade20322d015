"""OrderedTopicExpansion as the producers grow (issue: scale): the operator on the testbed fencing
a topic of 64 partitions to 128 while 10 -> 100 simulated producers (``_registry_producers``:
reports in ``__ordo_producers``, no processes; ``ORDO_SCALE=long``: to 1,000) are registered
for it. Per count:

- the fence wait the operator records (``status.fenceWaitSeconds``: from fencing to every live
  producer's acknowledgement read), and of it the operator's lag after the last
  acknowledgement was written;
- what the expansion writes to ``__ordo_producers``: one acknowledgement per producer (records,
  bytes), on top of the heartbeats (every producer every session / 3, ``OrderedProducer``'s
  pace: producers x 3 / session records per second).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
from confluent_kafka.admin import AdminClient, NewTopic

from ordo.epochs.log import ensure_log_topics
from ordo_testbed.members import api_client
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions

from ._plot import HERE
from ._registry_producers import SimulatedProducers
from ._result import Result
from ._testbed import full_testbed
from .scale_bench import LONG, growth

PRODUCERS = (10, 30, 100) + ((300, 1_000) if LONG else ())
FROM, TO = 64, 128
SESSION = 10.0  # OrderedProducer's default session
PNG = HERE / "scale_expansion_curves.png"


@dataclass(frozen=True)
class _Size:
    producers: int
    fence_wait: float  # s, the operator's status.fenceWaitSeconds
    lag: float  # s from the last acknowledgement written to the operator's end of fencing
    duration: float  # s, the whole expansion (status.durationSeconds)
    ack_records: int
    ack_bytes: int


def _expand(bootstrap: str, expansions: Expansions, producers: int) -> _Size:
    topic = f"grow-{producers}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, FROM)])[topic].result(30)
    sim = SimulatedProducers({"bootstrap.servers": bootstrap}, topic, producers, SESSION)
    try:
        before_records, before_bytes = sim.records, sim.bytes
        expansions.create(topic, topic, TO)
        status = expansions.wait_phase(topic, "Completed", 120)
        epoch = int(status["epoch"])
        started = _seconds(status["startedAt"])
        lag = started + float(status["fenceWaitSeconds"]) - sim.acks_flushed[epoch]
        # the acknowledgements, without the heartbeats that fell in the same time
        size = (sim.bytes - before_bytes) / max(1, sim.records - before_records)
        return _Size(producers, float(status["fenceWaitSeconds"]), lag, float(status["durationSeconds"]),
                     producers, round(size * producers))  # fmt: skip
    finally:
        sim.close()


def _seconds(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def run() -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp, full_testbed(Path(tmp)) as (bootstrap, kubeconfig):
        ensure_log_topics(AdminClient({"bootstrap.servers": bootstrap}))
        api = api_client(kubeconfig)
        core: Any = kubernetes.client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "scale-expansions"}})
        operator = OperatorProcess(
            kubeconfig, bootstrap, namespaces=["scale-expansions"], log_path=Path(tmp) / "op.log"
        )
        operator.start()
        expansions = Expansions(kubernetes.client.CustomObjectsApi(api), "scale-expansions")
        sizes = []
        try:
            for count in PRODUCERS:
                sizes.append(_expand(bootstrap, expansions, count))
                s = sizes[-1]
                line = f"fence wait {s.fence_wait:.2f} s (operator lag {s.lag:.2f} s), expansion "
                line += f"{s.duration:.2f} s, {s.ack_records} acknowledgements, {s.ack_bytes:,} B"
                print(f"  {count:>5} producers: {line}")
        finally:
            operator.stop()
    _plot(sizes)
    top = sizes[-1]
    counts = [s.producers for s in sizes]
    k = growth(counts, [s.fence_wait for s in sizes])
    label = f"{top.producers:,} simulated producers, {FROM} -> {TO} partitions"
    return [
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


def _plot(sizes: list[_Size]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = [s.producers for s in sizes]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    left.plot(counts, [s.fence_wait for s in sizes], marker="o", label="fence wait (operator's status)")
    left.plot(
        counts, [max(s.lag, 1e-3) for s in sizes], marker="o", label="of it, after the last acknowledgement"
    )
    left.plot(counts, [s.duration for s in sizes], marker="o", label="whole expansion")
    left.set(xscale="log", yscale="log", xlabel="registered producers", ylabel="s",
             title=f"expansion {FROM} -> {TO} partitions")  # fmt: skip
    right.plot(
        counts, [s.ack_bytes / 1024 for s in sizes], marker="o", label="acknowledgements per expansion"
    )
    heartbeats = [s.producers * 3 / SESSION * s.ack_bytes / s.ack_records / 1024 for s in sizes]
    label = f"heartbeats per second (session {SESSION:g} s)"
    right.plot(counts, heartbeats, marker="o", linestyle="--", label=label)
    right.set(xscale="log", yscale="log", xlabel="registered producers", ylabel="KiB",
              title="__ordo_producers")  # fmt: skip
    for axes in (left, right):
        axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(PNG, dpi=110)
    plt.close(figure)
