"""Kafka half of the ordo testbed: Apache Kafka (single-node KRaft) behind a thin fault proxy, and a
replicated 3-broker cluster for failover tests."""

from ordo_testbed.kafka.broker import KafkaBroker, KafkaTestbed, ProxyThread, run_foreground
from ordo_testbed.kafka.cluster import KafkaCluster
from ordo_testbed.kafka.control import RemoteFaults
from ordo_testbed.kafka.faults import Fault, FaultSet
from ordo_testbed.kafka.jars import KafkaSetupError
from ordo_testbed.kafka.proxy import FaultProxy

__all__ = [
    "Fault",
    "FaultProxy",
    "FaultSet",
    "KafkaBroker",
    "KafkaCluster",
    "KafkaSetupError",
    "KafkaTestbed",
    "ProxyThread",
    "RemoteFaults",
    "run_foreground",
]
