"""Two operator replicas (kopf peering) through expansions, the working one killed with -9.

Before: the standby ran its own topic watch. It knew no expansion in flight, so during every
expansion's Creating phase (partitions there, epoch not yet) it said PartitionsAddedOutsideOrdo
(this test failed so on the operator before), and it recorded epoch 0 of new topics beside the
working replica. Now only the replica kopf lets work watches topics and writes the epoch log; the
other takes over when the first dies.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from ordo.epochs import EpochState
from ordo.epochs.liveness import ProducerReport
from ordo.epochs.log import EpochLog
from ordo.ordered_producer import OrderedProducer
from ordo_testbed.kafka import Fault
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.kube.identity import CHART, apply_rbac, chart_rbac, token_kubeconfig
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions
from ordo_testbed.waiting import wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

PEERING = "ordo"
WROTE = "epoch log: wrote"  # the operator's line for each epoch log write (ordo_operator.kafka)


def test_two_replicas_the_working_one_killed_every_expansion_completes_and_one_writes(
    kafka: KafkaHandle, kube: Kube, log_topics: tuple[str, str], tmp_path: Path
) -> None:
    epochs, registry = log_topics
    topic = kafka.create_topic(2)
    kubeconfig = _peering_identity(kube, tmp_path)
    env = {
        "ORDO_EPOCH_TOPIC": epochs, "ORDO_REGISTRY_TOPIC": registry, "ORDO_TOPIC_CHECK_SECONDS": "0.5",
        "ORDO_PEERING_LIFETIME_SECONDS": "5", "POD_NAMESPACE": kube.namespace,
    }  # fmt: skip
    args = ["--peering", PEERING] + (["--no-scanning"] if kube.server is not None else [])

    def replica(name: str, priority: int) -> OperatorProcess:
        return OperatorProcess(
            kubeconfig, kafka.bootstrap, namespaces=[kube.namespace], env={**env, "POD_NAME": name},
            log_path=tmp_path / f"{name}.log", args=[*args, "--priority", str(priority)],
        ).start()  # fmt: skip

    first, second = replica("ordo-operator-a", 200), replica("ordo-operator-b", 100)
    wait_for(lambda: len(_peers(kube)) == 2, 60, "both replicas in the peering object")
    grow = Expansions(kube.custom, kube.namespace)
    stop = threading.Event()
    producer = OrderedProducer(kafka.config(linger_ms=2), epoch_topic=epochs, registry_topic=registry,
                               session_timeout=3.0)  # fmt: skip
    writing = threading.Thread(target=_keep_producing, args=(producer, topic, stop))
    writing.start()
    stubborn = Producer(kafka.config())
    try:
        wait_for(lambda: _history(kafka, epochs, topic) is not None, 60, "epoch 0 recorded")
        # the broker's answer to CreatePartitions comes 4 s late: for 4 s the new partitions exist
        # and no epoch has them, while the working replica's expansion is Creating
        late = kafka.faults.add(Fault(api="CreatePartitions", topic=topic, late=4.0, count=1))
        grow.create("to-4", topic, 4, fenceTimeoutSeconds=60)
        grow.wait_phase("to-4", "Completed", 90)
        assert late.hits == 1

        # a producer that never acknowledges holds the next fence: the working replica dies in it
        _report(stubborn, registry, topic, closed=False)
        grow.create("to-6", topic, 6, fenceTimeoutSeconds=120)
        grow.wait_phase("to-6", "Fencing", 60)
        assert _wrote(second) == 0, "the standby wrote nothing while the other worked"
        first.kill()
        _report(stubborn, registry, topic, closed=True)
        grow.wait_phase("to-6", "Completed", 120)  # the standby took over
        grow.create("to-8", topic, 8, fenceTimeoutSeconds=60)
        status = grow.wait_phase("to-8", "Completed", 90)
        assert (status["fromPartitions"], status["epoch"]) == (6, 3)
    finally:
        stop.set()
        writing.join(30)
        producer.close()
        first.stop()
        second.stop()
    history = _history(kafka, epochs, topic)
    assert history is not None
    assert [(e.epoch, e.partitions, e.state) for e in history.epochs] == [
        (epoch, partitions, EpochState.ACTIVE) for epoch, partitions in enumerate((2, 4, 6, 8))
    ]
    assert not kube.events("PartitionsAddedOutsideOrdo"), [e.message for e in kube.events()]
    assert _wrote(first) >= 3 and _wrote(second) >= 2, (_wrote(first), _wrote(second))
    log = EpochLog(kafka.config(), epochs)
    try:
        assert log.catch_up(15) and log.invalid_records == 0, "no record of a second writer refused"
    finally:
        log.close()


def _peering_identity(kube: Kube, folder: Path) -> Path:
    """kopf's peering CRDs and a KopfPeering in the namespace, and the chart's RBAC for a
    namespace-scoped operator with peering (on a real cluster: the test's own kubeconfig)."""
    import kubernetes

    extensions: Any = kubernetes.client.ApiextensionsV1Api(kube.api)
    for crd in yaml.safe_load_all((CHART / "crds" / "kopfpeerings.kopf.dev.yaml").read_text()):
        try:
            extensions.create_custom_resource_definition(crd)
        except kubernetes.client.ApiException as error:
            if error.status != 409:
                raise

    def created() -> bool:
        try:
            kube.custom.create_namespaced_custom_object(
                "kopf.dev", "v1", kube.namespace, "kopfpeerings",
                {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": PEERING}},
            )  # fmt: skip
        except kubernetes.client.ApiException as error:
            if error.status == 404:  # the CRD is not served yet
                return False
            if error.status != 409:
                raise
        return True

    wait_for(created, 30, "the KopfPeering")
    if kube.server is None:
        return kube.kubeconfig_path
    values = {"rbac": {"scope": "namespace"}, "watchNamespaces": [kube.namespace],
              "userRbac": {"create": False}, "peering": {"enabled": True}}  # fmt: skip
    objects = chart_rbac(values, "ordo", kube.namespace)
    apply_rbac(kube.api, objects)
    (account,) = [o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"]
    return token_kubeconfig(kube.server, kube.api, kube.namespace, account, folder / "operator.kubeconfig")


def _peers(kube: Kube) -> dict[str, Any]:
    peering = kube.custom.get_namespaced_custom_object(
        "kopf.dev", "v1", kube.namespace, "kopfpeerings", PEERING
    )
    return dict(peering.get("status") or {})


def _wrote(replica: OperatorProcess) -> int:
    return replica.log_text().count(WROTE)


def _history(kafka: KafkaHandle, epochs: str, topic: str) -> Any:
    log = EpochLog(kafka.config(), epochs)
    try:
        assert log.catch_up(15), log.describe()
        return log.history(topic)
    finally:
        log.close()


def _report(producer: Producer, registry: str, topic: str, *, closed: bool) -> None:
    """A producer of ``topic`` that reports live and never acknowledges a fence (then closes)."""
    report = ProducerReport(producer_id=f"stubborn-{topic}", topics=(topic,), session_timeout_ms=120_000,
                            reported_at_ms=int(time.time() * 1000), closed=closed)  # fmt: skip
    producer.produce(registry, key=report.producer_id.encode(), value=report.model_dump_json().encode())
    assert producer.flush(10) == 0


def _keep_producing(producer: OrderedProducer, topic: str, stop: threading.Event) -> None:
    i = 0
    while not stop.wait(0.005):  # a steady trickle, not synchronisation
        try:
            producer.produce(topic, str(i).encode(), key=f"k{i % 50}".encode())
        except BufferError:
            producer.poll(0.1)
            continue
        i += 1
        producer.poll(0)
