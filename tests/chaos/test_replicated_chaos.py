"""Replicated Kafka under chaos: three brokers (replication factor 3, min ISR 2, ordo's control
topics replicated like any other), OrderedProducers and GatedConsumers on a topic that
OrderedTopicExpansions grow, and a ProducerGroup whose GroupProducer members copy a source exactly
once, while each round kills -9 the broker holding a role (the leader of a partition being written,
a member's transaction coordinator, the consumers' group coordinator, the epoch log's leader),
some in the middle of an expansion, and starts it again with the same id and log directory.

Verdicts, by the independent verifiers reading what reached Kafka and what the consumers
processed: nothing acknowledged is lost, the exactly-once group wrote nothing twice, no key is out
of order (in Kafka across the epochs, and as the consumers processed it). Measured per kill (the
JSON report): the failover (until every partition the broker led has another leader; the
coordinator moved), how long writes stalled (until a record written after the kill was readable,
per topic), how long units stalled (until every source partition committed again), how long the
consumers stalled, the restart and the return to every ISR. Every wait has a deadline.

Runs when ``ORDO_FAILOVER_ROUNDS`` says how many rounds: ``make test`` (and so CI) 1, on the
3-broker cluster its session starts for other tests anyway; ``make failover`` 5, one per role
(about 4 minutes on this 2-core machine); ``make soak`` 20. ``ORDO_CHAOS_SEED`` replays a run.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ordo.group.checkpoints import CheckpointLog
from ordo.member_wire import transactional_id
from ordo.verify import check_topic, read_epochs, read_topic
from ordo_sandbox.scenario.sources import verify_sources
from ordo_sandbox.scenario.verify import read_delivered, read_processed
from ordo_sandbox.scenario.workload import Workload
from ordo_testbed.kafka.cluster import KafkaCluster
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.pods import Pod, PodSet
from ordo_testbed.records import RECORDS
from ordo_testbed.resources import Expansions, Groups, group_member_argv
from ordo_testbed.waiting import wait_for

from .arrivals import Arrivals, longest_gap
from .failover_schedule import FailoverLimits, Round, Target, make_rounds
from .runs import chosen_seed, publish

ROUNDS = int(os.environ.get("ORDO_FAILOVER_ROUNDS") or 0)
pytestmark = [
    pytest.mark.testbed,
    pytest.mark.slow,
    pytest.mark.skipif(
        not ROUNDS, reason="make test, make failover and make soak run it (ORDO_FAILOVER_ROUNDS)"
    ),
]

GROUP, SOURCE_PARTITIONS, MEMBERS = "copy", 6, 3
LABELS = {"app": "failover-member"}
PRODUCERS, CONSUMERS = 2, 2
WAIT = 180.0  # the most any one wait may take: a guard against a hang, never hit by a slow run
# every wait of a round in turn (coordinator, failover, restart, ISR, expansion, writes, units),
# the start and the end (settling, traffic, drain, verifiers, exits): a guard against a hang
TIMEOUT = int(6 * WAIT + max(ROUNDS, 1) * 7 * WAIT)


@pytest.fixture
def kafka(replicated_kafka: KafkaHandle) -> KafkaHandle:
    """This module runs on the 3-broker cluster, and so do conftest's ``log_topics`` and
    ``operator_process``, which take ``kafka``."""
    return replicated_kafka


@dataclass
class Kill:
    """One round, as it happened."""

    plan: Round
    node: int
    role: str
    was_controller: bool
    led: dict[str, list[int]]  # what the node led when it was killed
    written: dict[str, list[int]]  # the partitions of each data topic written before the kill
    at_ns: int = 0
    moved_ns: int = 0  # when the failover was seen: leaders (and the coordinator) moved
    failover_s: float = 0.0
    coordinator_s: float | None = None
    restart_s: float = 0.0
    in_sync_s: float = 0.0
    expansion_s: float | None = None  # its status: start to Completed
    paused_s: float | None = None  # its status: how long producers were held by its fence
    # the longest gap, from the kill until records flowed again after the failover:
    writes_s: dict[str, float] = field(default_factory=dict)  # topic -> between readable records
    units_s: float = 0.0  # between a source partition's committed units
    processed_s: float = 0.0  # between records the consumers processed, per partition

    def summary(self) -> dict[str, Any]:
        return {
            "round": self.plan.describe(),
            "node": self.node,
            "role": self.role,
            "controller": self.was_controller,
            "led": self.led,
            "failover s": round(self.failover_s, 2),
            "coordinator moved s": None if self.coordinator_s is None else round(self.coordinator_s, 2),
            "restart s": round(self.restart_s, 2),
            "back in every ISR s": round(self.in_sync_s, 2),
            "expansion s": self.expansion_s,
            "producers paused by it s": self.paused_s,
            "writes stalled s": {t: round(s, 2) for t, s in self.writes_s.items()},
            "units stalled s": round(self.units_s, 2),
            "consumers stalled s": round(self.processed_s, 2),
        }


@dataclass
class World:
    kafka: KafkaHandle
    cluster: KafkaCluster
    kube: Kube
    pods: PodSet
    workload: Workload
    arrivals: Arrivals
    epochs: str
    registry: str
    orders: str
    units: str
    checkpoints: str
    members: list[Pod] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)

    # --- the cast ---------------------------------------------------------------------------

    def start(self) -> None:
        """The group copying, its members settled, the workload producing and consuming, and a
        record readable in every partition of both topics."""
        groups = Groups(self.kube.custom, self.kube.namespace)
        groups.create(
            GROUP, SOURCE_PARTITIONS, LABELS, sessionTimeoutSeconds=10, checkpointTopic=self.checkpoints
        )
        for i in range(MEMBERS):
            argv = group_member_argv(
                self.kafka.bootstrap, self.units, records=1_000_000, batch=5, rate=4,
                epoch_topic=self.epochs, registry_topic=self.registry,
            )  # fmt: skip
            pod = self.pods.start(f"m-{i}", argv, labels=LABELS, env={"ORDO_GROUP": GROUP}, grace=15)
            self.members.append(pod)
        groups.wait_settled(GROUP, MEMBERS, WAIT, SOURCE_PARTITIONS)
        self.workload.start()
        partitions = FailoverLimits().partitions

        def flowing() -> bool:
            return (
                len(self.arrivals.partitions_written(self.orders)) == partitions
                and bool(self.arrivals.partitions_written(self.units))
                and self.arrivals.sources_committed() == list(range(SOURCE_PARTITIONS))
            )

        wait_for(flowing, WAIT, "records in every partition and a unit of every source partition", step=0.2)

    # --- a round ----------------------------------------------------------------------------

    def play(self, plan: Round) -> Kill:
        expansion = f"grow-to-{plan.expand_to}" if plan.expand_to else None
        expansions = Expansions(self.kube.custom, self.kube.namespace)
        if expansion is not None:
            expansions.create(expansion, self.orders, plan.expand_to, fenceTimeoutSeconds=60)
            pace(plan.lead)
        node, role, coordinator = self.holder(plan)
        topics = [self.orders, self.units, self.epochs, self.registry, self.checkpoints]
        controller = self.cluster.active_controller() == node
        written = {t: self.arrivals.partitions_written(t) for t in (self.orders, self.units)}
        kill = Kill(plan, node, role, controller, self.cluster.led_by(node, topics), written)
        kill.at_ns = time.monotonic_ns()
        self.cluster.kill(node)
        self.cluster.await_leaders_moved(node, WAIT)
        kill.failover_s = seconds_since(kill.at_ns)
        if coordinator is not None:
            key, kind = coordinator
            moved = lambda: self.cluster.coordinator(key, kind) not in (None, node)  # noqa: E731
            wait_for(moved, WAIT, f"the {kind} coordinator of {key} to move off node {node}", step=0.05)
            kill.coordinator_s = seconds_since(kill.at_ns)
        kill.moved_ns = time.monotonic_ns()
        pace(plan.down)
        started = time.monotonic()
        self.cluster.restart(node, WAIT)
        kill.restart_s = time.monotonic() - started
        started = time.monotonic()
        self.cluster.await_in_sync(node, WAIT)
        kill.in_sync_s = time.monotonic() - started
        if expansion is not None:
            status = expansions.wait_phase(expansion, "Completed", WAIT)
            kill.expansion_s, kill.paused_s = status.get("durationSeconds"), status.get("pausedSeconds")
        what = "a record readable after the failover in every partition written before the kill"
        writes = wait_for(lambda: self.write_stalls(kill), WAIT, what, step=0.2)
        what = "a unit of every source partition committed after the failover"
        units = wait_for(lambda: self.unit_stall(kill), WAIT, what, step=0.2)
        assert writes is not None and units is not None
        kill.writes_s, kill.units_s = writes, units
        return kill

    def holder(self, plan: Round) -> tuple[int, str, tuple[str, str] | None]:
        """The broker holding the round's role now, what it holds, and the coordinator key it is
        killed for (to see it move)."""
        if plan.target in (Target.TXN_COORDINATOR, Target.GROUP_COORDINATOR):
            if plan.target == Target.TXN_COORDINATOR:
                key, kind = (
                    transactional_id(self.kube.namespace, GROUP, plan.pick % SOURCE_PARTITIONS),
                    "transaction",
                )
            else:
                key, kind = self.workload.group, "group"
            node = wait_for(lambda: self.cluster.coordinator(key, kind), WAIT, f"the coordinator of {key}")
            assert node is not None
            return node, f"{kind} coordinator of {key}", (key, kind)
        if plan.target == Target.EPOCH_LOG_LEADER:
            topic, partitions = self.epochs, [0]
        elif plan.target == Target.ORDERED_LEADER:
            topic, partitions = self.orders, self.arrivals.partitions_written(self.orders)
        else:
            topic, partitions = self.units, self.arrivals.partitions_written(self.units)
        partition = partitions[plan.pick % len(partitions)]
        return self.cluster.leader(topic, partition), f"leader of {topic}[{partition}]", None

    def write_stalls(self, kill: Kill) -> dict[str, float] | None:
        """Per data topic, the longest gap between readable records of a partition written before
        the kill; None until each has a record readable after the failover."""
        stalls: dict[str, float] = {}
        for topic, partitions in kill.written.items():
            for partition in partitions:
                gap = self.arrivals.record_gap(topic, partition, kill.at_ns, kill.moved_ns)
                if gap is None:
                    return None
                stalls[topic] = max(stalls.get(topic, 0.0), gap)
        return stalls

    def unit_stall(self, kill: Kill) -> float | None:
        """The longest gap between a source partition's committed units; None until each has
        committed one after the failover."""
        gaps = [self.arrivals.commit_gap(p, kill.at_ns, kill.moved_ns) for p in range(SOURCE_PARTITIONS)]
        return None if any(gap is None for gap in gaps) else max(gap or 0.0 for gap in gaps)


def pace(seconds: float) -> None:
    """The schedule's pace (how long after an expansion a kill comes, how long a broker stays
    dead), not a synchronisation: every effect is then waited for as a condition."""
    threading.Event().wait(seconds)


def seconds_since(at_ns: int) -> float:
    return (time.monotonic_ns() - at_ns) / 1e9


def consumer_stalls(kills: list[Kill], topic: str, logs: list[Path]) -> None:
    """Each kill's longest gap between records the consumers processed of a partition of
    ``topic``, from the kill until they processed one after the failover (their own logs)."""
    processed: dict[int, list[int]] = {}  # partition -> processed at (monotonic ns)
    for path in logs:
        for record in read_processed(path):
            processed.setdefault(record.partition, []).append(record.at_ns)
    for times in processed.values():
        times.sort()
    for kill in kills:
        gaps = [longest_gap(processed.get(p, []), kill.at_ns, kill.moved_ns) for p in kill.written[topic]]
        kill.processed_s = max((gap for gap in gaps if gap is not None), default=float("nan"))


def spread(values: list[float]) -> dict[str, float]:
    if not values:  # e.g. no round killed the coordinator (one round in make test)
        return {}
    return {
        "min": round(min(values), 2),
        "median": round(statistics.median(values), 2),
        "max": round(max(values), 2),
    }


@pytest.fixture
def world(
    kafka: KafkaHandle,
    kube: Kube,
    pods: PodSet,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
    tmp_path: Path,
) -> Iterator[World]:
    assert kafka.cluster is not None
    operator = operator_process(ORDO_MAX_PARTITIONS="64").start()
    epochs, registry = log_topics
    orders = kafka.create_topic(FailoverLimits().partitions, prefix="orders")
    units = kafka.create_topic(3, prefix="units")
    checkpoints = kafka.topic("checkpoints")
    workload = Workload(
        kafka.bootstrap, orders, tmp_path / "workload", producers=PRODUCERS, consumers=CONSUMERS,
        keys=400, rate=100, epoch_topic=epochs, registry_topic=registry,
    )  # fmt: skip
    arrivals = Arrivals(kafka.bootstrap, [orders, units], checkpoints).start()
    world = World(
        kafka, kafka.cluster, kube, pods, workload, arrivals, epochs, registry, orders, units, checkpoints
    )
    try:
        yield world
    finally:
        workload.stop()
        arrivals.stop()
        operator.stop()
        print(operator.log_text()[-3000:])


@pytest.mark.timeout(TIMEOUT)
def test_killed_brokers_lose_duplicate_and_reorder_nothing(world: World) -> None:
    seed = chosen_seed()
    replay = f"failover seed {seed}: replay with ORDO_CHAOS_SEED={seed} ORDO_FAILOVER_ROUNDS={ROUNDS}"
    print(replay, flush=True)
    plans = make_rounds(seed, ROUNDS)
    world.start()
    cluster, config = world.cluster, {"bootstrap.servers": world.kafka.bootstrap}
    control = [world.epochs, world.registry, world.checkpoints, "__consumer_offsets", "__transaction_state"]
    for topic in [world.orders, world.units, *control]:
        assert cluster.replication(topic) == (3, 2), f"{topic}: (replicas, min ISR)"
    for i, plan in enumerate(plans):
        print(f"round {i + 1}/{len(plans)}: {plan.describe()}", flush=True)
        kill = world.play(plan)
        world.kills.append(kill)
        print(json.dumps(kill.summary()), flush=True)

    # the ordered side: everything acknowledged is in Kafka once and in order, and was processed
    delivered_records = world.workload.stop_producers()
    if not world.workload.drain(delivered_records, WAIT):
        raise AssertionError(f"{replay}: {world.workload.why_not_drained(delivered_records)}")
    alive = [p.poll() is None for p in world.workload.consumers]
    consumed = world.workload.stop()
    delivered = read_delivered(world.workload.delivered_paths())
    read = read_topic(config, world.orders, WAIT, layout=RECORDS)
    stored = read.records
    in_kafka = check_topic(
        world.orders, stored, read_epochs(config, world.orders, world.epochs), delivered, read.unreadable
    )
    logs = [world.workload.processed_path(i) for i in range(CONSUMERS)]
    consumer_stalls(world.kills, world.orders, logs)

    # the group: every unit up to its final checkpoint is in Kafka exactly once, in source order
    running = [pod.returncode is None for pod in world.members]
    for pod in world.members:
        pod.sigterm()
    for pod in world.members:
        pod.wait(60)
    reader = CheckpointLog(config, world.checkpoints)
    try:
        assert reader.catch_up(60), f"{replay}: the checkpoint topic was not read to its end"
        final = {p: int(c.checkpoint or 0) for p, c in reader.of_group(world.kube.namespace, GROUP).items()}
    finally:
        reader.close()
    sources = verify_sources(world.kafka.bootstrap, world.units, final, WAIT)

    kills = world.kills
    report = {
        "test": "replicated",
        "seed": seed,
        "rounds": len(kills),
        "failover s": spread([k.failover_s for k in kills]),
        "coordinator moved s": spread([k.coordinator_s for k in kills if k.coordinator_s is not None]),
        "restart s": spread([k.restart_s for k in kills]),
        "back in every ISR s": spread([k.in_sync_s for k in kills]),
        "ordered writes stalled s": spread([k.writes_s.get(world.orders, 0.0) for k in kills]),
        "units written stalled s": spread([k.writes_s.get(world.units, 0.0) for k in kills]),
        "units committed stalled s": spread([k.units_s for k in kills]),
        "consumers stalled s": spread([k.processed_s for k in kills]),
        "expansions s (producers paused s)": [(k.expansion_s, k.paused_s) for k in kills if k.plan.expand_to],
        "ordered": {
            "acknowledged": sum(delivered.values()),
            "in kafka": in_kafka.records,
            "duplicates in kafka": in_kafka.duplicates,
            "missing in kafka": in_kafka.missing,
            "out of order in kafka": in_kafka.order_violations,
            "epochs": in_kafka.epochs,
            "consumers processed": consumed.processed,
            "re-deliveries": consumed.duplicates,
            "lost by consumers": consumed.lost,
            "out of order at consumers": consumed.order_violations,
        },
        "group": {
            "records": sources.records,
            "missing": sources.missing,
            "duplicates": sources.duplicates,
            "out of order": sources.out_of_order,
            "beyond checkpoint": sources.beyond,
        },
        "kills": [k.summary() for k in kills],
    }
    publish(report)

    assert all(alive), f"{replay}: a consumer died under the kills"
    assert all(running), f"{replay}: a member died under the kills"
    assert in_kafka.ok, f"{replay}: {in_kafka.summary()}; {in_kafka.examples}"
    assert consumed.ok, f"{replay}: {consumed.summary()}; {consumed.examples}"
    assert sources.ok, f"{replay}: {sources.summary()}; {sources.examples}"
    assert sorted(final) == list(range(SOURCE_PARTITIONS)), f"{replay}: checkpoints {final}"
    grown = len({plan.expand_to for plan in plans if plan.expand_to})
    assert in_kafka.epochs >= 1 + min(grown, 2), "expansions grew the topic through the kills"
    assert sources.records > 100, "the members copied through the kills"
