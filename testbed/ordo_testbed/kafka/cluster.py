"""A replicated Apache Kafka: three KRaft nodes on 127.0.0.1, and what a failover test does to them
(find the leader of a partition or the coordinator of a transactional id or group, kill -9 a node,
start it again with the same id and log directory, wait until it is back in every ISR).

Each node is broker and controller in one JVM, so the controller quorum is the three of them and
survives the death of any one, as the partitions do (replication factor 3, min ISR 2). No fault
proxy stands in front: clients talk to the brokers, and a dead broker refuses connections as a dead
machine's port would.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, ClusterMetadata, ConfigResource
from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest, PartitionData, TopicData
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32

from ordo.client_config import logged
from ordo_testbed.kafka.broker import BROKER_SETTINGS, HOST, KafkaBroker, Ports
from ordo_testbed.kafka.oneshot import ask
from ordo_testbed.waiting import wait_for

__all__ = ["CLUSTER_HEAP", "REPLICATED_SETTINGS", "KafkaCluster", "stable_port"]

CLUSTER_HEAP = os.environ.get("ORDO_KAFKA_CLUSTER_HEAP", "512m")

# What a user's cluster needs for ordo to lose nothing when a broker dies (docs/reliability.md,
# "Replicated Kafka"), on the single node's settings.
REPLICATED_SETTINGS: dict[str, str] = {
    **BROKER_SETTINGS,
    # every topic created with the defaults (ordo's control topics among them) is on all three,
    # and an acks=all write is acknowledged once two have it
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    # Kafka's default, said here: a leader comes only from the ISR, never a replica that lags
    "unclean.leader.election.enable": "false",
    # the controller fences a silent broker, and moves its leaderships, after this long: Kafka's
    # 9 s default makes every failover take 9 s or more
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "4000",
    # three JVMs share 2 cores with the rest of the test
    "num.io.threads": "2",
    "background.threads": "2",
}

_KEY_TYPES = {"group": 0, "transaction": 1}
_METADATA_LOG = "__cluster_metadata"


def stable_port(host: str = HOST) -> int:
    """A free port below the kernel's ephemeral range. A node comes back on its own ports (the
    quorum's voters name them), and a port in that range can be handed to some process's
    outgoing connection while the node is down."""
    ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range")
    low = int(ephemeral.read_text().split()[0]) if ephemeral.exists() else 32768
    chooser = random.SystemRandom()
    for _ in range(200):
        port = chooser.randrange(10_000, low)
        try:
            with socket.socket() as sock:
                sock.bind((host, port))
            return port
        except OSError:
            continue
    raise RuntimeError(f"no free port between 10000 and {low}")


class KafkaCluster:
    """Three (``nodes``) Apache Kafka KRaft nodes, ids 1..n, each broker and controller in one JVM.

    ``bootstrap`` names every node's client listener. ``state_dir`` keeps each node's log
    directory in ``node-<id>`` (None: a temporary directory, removed by :meth:`stop`). Kill and
    restart nodes from one thread that lives as long as the cluster: a node ends with the thread
    that started it (``die_with_parent``).
    """

    def __init__(
        self,
        nodes: int = 3,
        *,
        state_dir: Path | None = None,
        settings: Mapping[str, str] = REPLICATED_SETTINGS,
        heap: str = CLUSTER_HEAP,
    ) -> None:
        self._owned_dir: str | None = None
        if state_dir is None:
            self._owned_dir = tempfile.mkdtemp(prefix="ordo-kafka-cluster-")
            state_dir = Path(self._owned_dir)
        self.state_dir = state_dir
        self.brokers = {
            n: KafkaBroker(state_dir / f"node-{n}", node_id=n, settings=settings, heap=heap)
            for n in range(1, nodes + 1)
        }
        self._admin: AdminClient | None = None
        self.startup_seconds = 0.0

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{b.client_port}" for b in self.brokers.values())

    @property
    def node_ids(self) -> list[int]:
        return list(self.brokers)

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            # a dead node's connection errors go to logging, not to the test's stderr
            self._admin = AdminClient(logged({"bootstrap.servers": self.bootstrap}))
        return self._admin

    def start(self, timeout: float = 120.0) -> KafkaCluster:
        """Start every node and return once each answers (which a KRaft broker does only once the
        quorum has a leader and has unfenced it). Retries on other ports if one was taken."""
        began = time.monotonic()
        for _ in range(3):
            for broker in self.brokers.values():
                broker.ports = Ports.free(stable_port)
            for node in self.brokers:
                self._launch(node)
            if all([broker.await_ready(timeout=timeout) for broker in self.brokers.values()]):
                self.startup_seconds = time.monotonic() - began
                return self
            for broker in self.brokers.values():
                broker.kill()
        raise RuntimeError(f"the Kafka cluster did not start (logs: {self.state_dir}/node-*/broker.log)")

    def _launch(self, node: int) -> None:
        broker = self.brokers[node]
        voters = ",".join(b.voter for b in self.brokers.values())
        broker.launch(broker.settings(f"{HOST}:{broker.client_port}", voters))

    def kill(self, node: int) -> None:
        """kill -9 the node: no controlled shutdown, its log directory left as it was."""
        self.brokers[node].kill()

    def restart(self, node: int, timeout: float = 120.0) -> None:
        """Start a killed node again, same id, ports and log directory (Kafka recovers the log
        of an unclean shutdown), and return once it answers."""
        self._launch(node)
        if not self.brokers[node].await_ready(timeout=timeout):
            raise RuntimeError(f"node {node} did not come back (log: {self.brokers[node].log_path})")

    def running(self) -> list[int]:
        return [n for n, b in self.brokers.items() if b.running]

    def heal(self, timeout: float = 120.0) -> None:
        """Every node running again and back in every ISR (after a test that left one dead)."""
        for node in self.brokers:
            if not self.brokers[node].running:
                self.restart(node, timeout)
                self.await_in_sync(node, timeout)

    def stop(self) -> None:
        """Kill every node. A controlled shutdown of the last nodes of a quorum waits for a
        controller that is gone (30 s each, measured); recovery restores a kept state_dir."""
        self._admin = None
        for broker in self.brokers.values():
            broker.kill()
        if self._owned_dir is not None:
            shutil.rmtree(self._owned_dir, ignore_errors=True)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what the cluster says --------------------------------------------------------------------

    def metadata(self, topic: str | None = None) -> ClusterMetadata:
        """Metadata of every topic (internal ones included) or of one, asked of a live broker now."""
        return self.admin.list_topics(topic, timeout=10)

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader now (-1: none)."""
        return int(self.metadata(topic).topics[topic].partitions[partition].leader)

    def led_by(self, node: int, topics: Iterable[str]) -> dict[str, list[int]]:
        """Of ``topics``, the partitions ``node`` leads now."""
        found: dict[str, list[int]] = {}
        metadata = self.metadata().topics
        for topic in topics:
            parts = metadata[topic].partitions if topic in metadata else {}
            led = sorted(p for p, part in parts.items() if part.leader == node)
            if led:
                found[topic] = led
        return found

    def replication(self, topic: str) -> tuple[int, int]:
        """(fewest replicas of any of its partitions, its min.insync.replicas)."""
        replicas = min(len(p.replicas) for p in self.metadata(topic).topics[topic].partitions.values())
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        configs = self.admin.describe_configs([resource])[resource].result(10)
        return replicas, int(configs["min.insync.replicas"].value)

    def coordinator(self, key: str, kind: str = "transaction") -> int | None:
        """The broker coordinating transactional id (``kind="transaction"``) or consumer group
        (``"group"``) ``key`` now, by FindCoordinator; None while no live broker names one."""
        request = FindCoordinatorRequest(key_type=i8(_KEY_TYPES[kind]), coordinator_keys=(key,))
        for node in self.running():
            try:
                answer = ask(HOST, self.brokers[node].broker_port, request)
            except OSError:
                continue
            found = answer.coordinators[0]
            return int(found.node_id) if found.error_code == ErrorCode.none else None
        return None

    def active_controller(self) -> int | None:
        """The quorum's leader (DescribeQuorum, which a broker forwards to it); None while there
        is none."""
        partition = PartitionData(partition_index=i32(0))
        request = DescribeQuorumRequest(
            topics=(TopicData(topic_name=TopicName(_METADATA_LOG), partitions=(partition,)),)
        )
        for node in self.running():
            try:
                answer: Any = ask(HOST, self.brokers[node].broker_port, request)
            except OSError:
                continue
            if answer.error_code != ErrorCode.none or not answer.topics:
                return None
            leader = int(answer.topics[0].partitions[0].leader_id)
            return leader if leader >= 0 else None
        return None

    # --- waits (each a condition with a deadline) -------------------------------------------

    def await_leaders_moved(self, node: int, timeout: float = 60.0) -> None:
        """Until no partition is led by ``node`` (dead) or has no leader: the controller fenced it
        and elected leaders from the ISRs."""

        def moved() -> bool:
            return all(
                part.leader not in (node, -1)
                for topic in self.metadata().topics.values()
                for part in topic.partitions.values()
            )

        wait_for(moved, timeout, f"every partition led by node {node} to have a new leader", step=0.05)

    def await_in_sync(self, node: int, timeout: float = 120.0) -> None:
        """Until ``node`` is in the ISR of every partition it holds a replica of."""

        def in_sync() -> bool:
            return all(
                node in part.isrs
                for topic in self.metadata().topics.values()
                for part in topic.partitions.values()
                if node in part.replicas
            )

        wait_for(in_sync, timeout, f"node {node} back in the ISR of every partition", step=0.1)
