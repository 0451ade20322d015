"""Shared fixtures: the Kafka testbed (``kafka``) and the Kubernetes emulator (``kube``, ``pods``)."""

from ordo.testbed.kafka.fixtures import *  # noqa: F403
from ordo.testbed.kube.fixtures import *  # noqa: F403
