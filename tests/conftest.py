"""Fixtures the suite shares beyond the harness's: the harness's own (the Kafka testbed ``kafka``,
the Kubernetes API server ``kube``, ``pods``, ...) come from its pytest plugin (the ``pytest11``
entry points of ordo-kafka-testbed, installed by ``make venv``)."""

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from ordo.async_consumer import AsyncConsumer
from ordo.epochs.log import ensure_log_topics
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.kube.identity import operator_identity
from ordo_testbed.operator import OperatorProcess

# Property tests judge results, not speed: on a loaded 2-core machine an example can take seconds,
# and hypothesis's default 200 ms deadline would fail it (tests/unit/test_epochs.py did, in a full run).
settings.register_profile("ordo", deadline=None)
settings.load_profile("ordo")


@pytest.fixture
def closing() -> Iterator[list[AsyncConsumer]]:
    """AsyncConsumers the test makes, closed after it (each given a second for its records)."""
    made: list[AsyncConsumer] = []
    yield made
    for consumer in made:
        consumer.close(timeout=1)


@pytest.fixture
def log_topics(kafka: KafkaHandle) -> tuple[str, str]:
    """An epoch log and a producer registry of this test's own: (epoch topic, registry topic)."""
    epochs, registry = kafka.topic("epochs"), kafka.topic("producers")
    ensure_log_topics(kafka.admin, epochs, registry)
    return epochs, registry


@pytest.fixture
def operator_process(
    kafka: KafkaHandle, kube: Kube, log_topics: tuple[str, str], tmp_path: Path
) -> Iterator[Callable[..., OperatorProcess]]:
    """Makes (not starts) operator processes for this test's namespace and log topics; stops them.
    On the testbed each runs as the chart makes it: its ServiceAccount, with the chart's Role."""
    made: list[OperatorProcess] = []
    kubeconfig, args = kube.kubeconfig_path, []
    if kube.server is not None:
        kubeconfig = operator_identity(kube.server, kube.api, kube.namespace, tmp_path)
        args = ["--no-scanning"]  # as the chart runs a namespace-scoped operator

    def make(**env: str) -> OperatorProcess:
        epochs, registry = log_topics
        process = OperatorProcess(
            kubeconfig,
            kafka.bootstrap,
            namespaces=[kube.namespace],
            env={"ORDO_EPOCH_TOPIC": epochs, "ORDO_REGISTRY_TOPIC": registry, **env},
            log_path=tmp_path / "operator.log",
            args=args,
        )
        made.append(process)
        return process

    yield make
    for process in made:
        process.stop()
