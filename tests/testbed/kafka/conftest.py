"""Kafka testbed fixtures (they live in ordo.testbed.kafka.fixtures so other suites can reuse them)."""

from ordo.testbed.kafka.fixtures import *  # noqa: F403
