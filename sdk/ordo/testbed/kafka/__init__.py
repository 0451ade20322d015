"""Kafka half of the ordo testbed: Apache Kafka (single-node KRaft) behind a thin fault proxy."""

from .broker import KafkaBroker, KafkaTestbed, ProxyThread, run_foreground
from .control import RemoteFaults
from .faults import Fault, FaultSet
from .jars import KafkaSetupError
from .proxy import FaultProxy

__all__ = [
    "Fault",
    "FaultProxy",
    "FaultSet",
    "KafkaBroker",
    "KafkaSetupError",
    "KafkaTestbed",
    "ProxyThread",
    "RemoteFaults",
    "run_foreground",
]
