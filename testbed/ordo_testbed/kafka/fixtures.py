"""pytest fixtures for the Kafka testbed; import them from a conftest.py (``from ... import *``).

One Apache Kafka broker per test session, behind the fault proxy. ``ORDO_TEST_BOOTSTRAP=host:port``
runs the same tests against that Kafka instead: no proxy, no faults (fault tests skip themselves
through ``kafka.require_faults()``). Tests that kill brokers take ``replicated_kafka``: a
3-broker cluster of the testbed's own (``kafka_cluster``, started on first use, one per session;
skipped with ``ORDO_TEST_BOOTSTRAP``). Tests of credentials take ``secured_kafka``: a broker with
SASL_SSL (SCRAM-SHA-512) and mutual-TLS listeners and the Strimzi-shaped Secrets to reach them
(started on first use, one per session; skipped with ``ORDO_TEST_BOOTSTRAP``).
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from ordo.client_config import logged
from ordo.kafka_group_protocol import GROUP_PROTOCOLS
from ordo.topics import await_served
from ordo_testbed.kafka.broker import KafkaTestbed
from ordo_testbed.kafka.cluster import KafkaCluster
from ordo_testbed.kafka.faults import FaultSet
from ordo_testbed.kafka.secured import SecuredKafka

__all__ = [
    "KafkaHandle",
    "group_protocol",
    "kafka",
    "kafka_cluster",
    "kafka_testbed",
    "replicated_kafka",
    "secured_kafka",
    "unique_topic",
]

BOOTSTRAP_ENV = "ORDO_TEST_BOOTSTRAP"


@dataclass
class KafkaHandle:
    bootstrap: str
    admin: AdminClient
    testbed: KafkaTestbed | None
    _topic: Callable[[str], str] = field(repr=False)
    cluster: KafkaCluster | None = None  # the replicated cluster: brokers to kill

    @property
    def faults(self) -> FaultSet:
        self.require_faults()
        assert self.testbed is not None
        return self.testbed.faults

    @property
    def direct_bootstrap(self) -> str:
        """The broker itself, no fault proxy in the path (a real Kafka: its bootstrap)."""
        return self.testbed.direct_bootstrap if self.testbed is not None else self.bootstrap

    def require_faults(self) -> None:
        if self.testbed is None:
            pytest.skip(f"fault injection needs the testbed proxy (this Kafka has none: {self.bootstrap})")

    def config(self, **extra: Any) -> dict[str, Any]:
        """Client config for this broker; keyword names use '_' for '.'."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap}
        config.update({k.replace("_", "."): v for k, v in extra.items()})
        return config

    def topic(self, prefix: str = "t") -> str:
        return self._topic(prefix)

    def create_topic(self, partitions: int = 1, prefix: str = "t", name: str | None = None) -> str:
        """A new topic, returned once the broker serves every partition of it (a record written
        to a partition it lists but does not host yet can be acknowledged and lost)."""
        name = name or self.topic(prefix)
        self.admin.create_topics([NewTopic(name, partitions)], operation_timeout=10)[name].result(15)
        await_served(self.admin, name, partitions, 30)
        return name

    def grow(self, topic: str, partitions: int) -> None:
        """Raise ``topic`` to ``partitions`` outside ordo (no epoch), and return once the broker
        serves the new partitions (as the operator does before it publishes an epoch)."""
        self.admin.create_partitions([NewPartitions(topic, partitions)])[topic].result(15)
        await_served(self.admin, topic, partitions, 30)


@pytest.fixture(scope="session")
def kafka_testbed() -> Iterator[KafkaTestbed | None]:
    if os.environ.get(BOOTSTRAP_ENV):
        yield None
        return
    with KafkaTestbed() as bed:
        yield bed


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Topic names unique per test (and per run, for a long-lived real Kafka)."""
    run = uuid.uuid4().hex[:6]
    counter = itertools.count()
    test = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40]

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{test}-{run}-{next(counter)}"

    return make


@pytest.fixture
def kafka(kafka_testbed: KafkaTestbed | None, unique_topic: Callable[[str], str]) -> Iterator[KafkaHandle]:
    bootstrap = kafka_testbed.bootstrap if kafka_testbed is not None else os.environ[BOOTSTRAP_ENV]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    handle = KafkaHandle(bootstrap, admin, kafka_testbed, unique_topic)
    try:
        yield handle
    finally:
        if kafka_testbed is not None:
            kafka_testbed.faults.clear()


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[KafkaCluster]:
    if os.environ.get(BOOTSTRAP_ENV):
        pytest.skip(
            f"the replicated cluster's tests kill its brokers: the testbed's own only ({BOOTSTRAP_ENV})"
        )
    with KafkaCluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def secured_kafka() -> Iterator[SecuredKafka]:
    """The secured broker (``SecuredKafka``): ``scram_bootstrap``, ``tls_bootstrap``, ``secrets()``."""
    if os.environ.get(BOOTSTRAP_ENV):
        pytest.skip(f"the secured listeners are the testbed's own ({BOOTSTRAP_ENV})")
    with SecuredKafka() as broker:
        yield broker


@pytest.fixture
def replicated_kafka(
    kafka_cluster: KafkaCluster, unique_topic: Callable[[str], str]
) -> Iterator[KafkaHandle]:
    """A handle on the 3-broker cluster (no fault proxy); afterwards every broker runs and is in
    sync again, whatever the test killed."""
    admin = AdminClient(logged({"bootstrap.servers": kafka_cluster.bootstrap}))
    try:
        yield KafkaHandle(kafka_cluster.bootstrap, admin, None, unique_topic, cluster=kafka_cluster)
    finally:
        kafka_cluster.heal()


@pytest.fixture(params=GROUP_PROTOCOLS)
def group_protocol(request: pytest.FixtureRequest) -> str:
    """A test taking this runs once per consumer group protocol: classic and KIP-848's consumer."""
    protocol: str = request.param
    return protocol
