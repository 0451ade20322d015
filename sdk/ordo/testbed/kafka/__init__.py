"""Kafka half of the ordo testbed: Tansu behind a Kafka-protocol proxy that closes its gaps."""

from .broker import KafkaTestbed, ProxyThread, TansuBroker, run_foreground
from .control import RemoteFaults
from .faults import Fault, FaultSet
from .proxy import KafkaProxy

__all__ = [
    "Fault",
    "FaultSet",
    "KafkaProxy",
    "KafkaTestbed",
    "ProxyThread",
    "RemoteFaults",
    "TansuBroker",
    "run_foreground",
]
