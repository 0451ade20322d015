"""ordo's test harness as a pytest plugin (the ``pytest11`` entry point of ordo-kafka-testbed): a
pytest run where the harness is installed has its fixtures, no conftest.py importing them.

The Kafka testbed's (``ordo_testbed.kafka.fixtures``): ``kafka_testbed``, ``kafka``,
``unique_topic``, ``kafka_cluster``, ``secured_kafka``, ``replicated_kafka``, ``group_protocol``;
the Kubernetes API server's (``ordo_testbed.kube.fixtures``): ``kube_cluster``, ``kube_server``,
``kube``, ``pods``.
"""

from __future__ import annotations

import importlib

import pytest

FIXTURE_MODULES = ("ordo_testbed.kafka.fixtures", "ordo_testbed.kube.fixtures")


def pytest_configure(config: pytest.Config) -> None:
    # once every plugin is loaded: the fixtures' modules import kio, which registers hypothesis
    # strategies as it is imported, and before hypothesis's own plugin that warns. Registered as
    # they are (a conftest.py may have imported them already: nothing to rewrite, no assertions)
    for name in FIXTURE_MODULES:
        if config.pluginmanager.get_plugin(name) is None:
            config.pluginmanager.register(importlib.import_module(name), name)
