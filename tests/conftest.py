"""Shared fixtures: the Kafka testbed (``kafka``) for every suite."""

from ordo.testbed.kafka.fixtures import *  # noqa: F403
