"""TopicAutoscaler end to end: the operator measures a topic's load from Kafka, grows it through an
OrderedTopicExpansion it owns once the load stayed above the target for the window, grows a topic
whose consumer group's committed offsets lag (the lag target alone), leaves a topic below its target
alone, says what it cannot do (a missing topic; an expansion of the name it wants that ended without
growing the topic; a second autoscaler of a topic, until the first is deleted), and the independent
verifier finds every key in order, none lost or doubled."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from kubernetes.client.exceptions import ApiException

from ordo.api import TopicAutoscaler
from ordo.ordered_producer import OrderedProducer
from ordo.verify import KafkaKey
from ordo.verify.topic import check_topic, read_epochs, read_topic
from ordo_operator import kube as operator_kube
from ordo_operator.autoscalers import expansion_body, release
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed

GROUP, VERSION, PLURAL = "ordo.dev", "v1alpha1", "topicautoscalers"
KEYS = 40
LAGGED = 60  # records the lagging group has not consumed: 30 per partition of 2, 10 allowed


def _autoscaler(kube: Kube, name: str, topic: str, **spec: Any) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TopicAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "topic": topic,
            "minPartitions": 2,
            "maxPartitions": 4,
            "targets": {"recordsPerSecondPerPartition": 20},
            "stabilizationWindowSeconds": 3,
            "measureIntervalSeconds": 1,
            "cooldownSeconds": 60,
            "fenceTimeoutSeconds": 20,
            **spec,
        },
    }
    kube.custom.create_namespaced_custom_object(GROUP, VERSION, kube.namespace, PLURAL, body)


def _status(kube: Kube, name: str) -> dict[str, Any]:
    found = kube.custom.get_namespaced_custom_object(GROUP, VERSION, kube.namespace, PLURAL, name)
    return dict(found.get("status") or {})


def _ready(kube: Kube, name: str, reason: str) -> str | None:
    """The Ready condition's message while its reason is ``reason``."""
    found = [c for c in _status(kube, name).get("conditions", []) if c["type"] == "Ready"]
    return str(found[0].get("message") or "-") if found and found[0]["reason"] == reason else None


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _lagging_group(kafka: KafkaHandle, topic: str, group: str) -> None:
    """``LAGGED`` records in ``topic`` and ``group`` committed at offset 0 of each partition: as
    a consumer that committed its start and stopped."""
    producer, failed = Producer(kafka.config()), []
    for i in range(LAGGED):
        producer.produce(
            topic, b"v", key=f"k{i}".encode(), partition=i % 2, on_delivery=lambda e, _: failed.append(e)
        )
    assert producer.flush(30) == 0 and failed == [None] * LAGGED, failed

    def committed() -> bool:  # a new group's coordinator may still be loading: each partition says
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, 0) for p in range(2)])
        done = kafka.admin.alter_consumer_group_offsets([request])[group].result(30)
        return all(tp.error is None for tp in done.topic_partitions)

    wait_for(committed, 30, "the group's offsets committed", step=0.5)


def _produce(producer: OrderedProducer, rates: dict[str, float], stop: threading.Event) -> None:
    """``rates``: records per second per topic, each key numbered 0, 1, 2, ... in order."""
    sent = {topic: 0 for topic in rates}
    began = time.monotonic()
    while not stop.is_set():
        elapsed = time.monotonic() - began
        for topic, rate in rates.items():
            while sent[topic] < elapsed * rate:
                i = sent[topic]
                value = json.dumps({"seq": i // KEYS}).encode()
                producer.produce(topic, value, key=f"{topic}-k{i % KEYS}".encode())
                sent[topic] += 1
        producer.poll(0)
        stop.wait(0.01)  # pacing the rate, not synchronisation


def test_load_above_target_grows_the_topic_in_order_and_load_below_does_not(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
) -> None:
    epochs, registry = log_topics
    busy, quiet = kafka.create_topic(2, prefix="busy"), kafka.create_topic(2, prefix="quiet")
    floor, lagging = kafka.create_topic(2, prefix="floor"), kafka.create_topic(2, prefix="lagging")
    expansions = Expansions(kube.custom, kube.namespace)
    expansions.create("floor-4", f"{floor}-gone", 4)  # takes the name the autoscaler "floor" wants, and fails
    with pytest.raises(ApiException) as refused:  # the CRD's CEL rule: nothing is created
        _autoscaler(kube, "bad", busy, minPartitions=8)
    assert refused.value.status == 422 and "minPartitions must not be larger" in str(refused.value.body)
    operator = operator_process(ORDO_MAX_PARTITIONS="64").start()
    producer = OrderedProducer(
        kafka.config(linger_ms=2), epoch_topic=epochs, registry_topic=registry, session_timeout=3.0
    )
    stop = threading.Event()
    writer = threading.Thread(target=_produce, args=(producer, {busy: 200.0, quiet: 10.0}, stop))
    writer.start()
    try:
        _autoscaler(kube, "busy", busy)
        _autoscaler(kube, "second", busy)  # the younger ("busy" < "second" in a tie): decides nothing
        lag_target = {"consumerGroups": [{"name": "billing", "lagPerPartition": 10}]}
        _autoscaler(kube, "lagging", lagging, targets=lag_target)  # nothing written: lag alone
        _lagging_group(kafka, lagging, "billing")  # while the operator starts measuring
        _autoscaler(kube, "quiet", quiet)
        _autoscaler(kube, "nowhere", f"{busy}-missing")  # bad input: a condition, an Event, nothing else
        expansions.wait_phase("floor-4", "Failed", 30)
        _autoscaler(kube, "floor", floor, minPartitions=4)  # grows to 4 at once, but floor-4 ended Failed
        decided = wait_for(lambda: _status(kube, "busy").get("lastDecision"), 30, "a decision", step=0.2)
        assert decided is not None
        by_lag = wait_for(
            lambda: _status(kube, "lagging").get("lastDecision"), 30, "a lag decision", step=0.2
        )
        waiting = wait_for(lambda: _ready(kube, "second", "TopicHasAutoscaler"), 15, "second refused")
        expansion = expansions.wait_phase(decided["expansion"], "Completed", 30)
        settled = wait_for(  # the expansion ended: the name goes, the cooldown counts from here
            lambda: (
                (s := _status(kube, "busy")).get("currentPartitions") == 4
                and "expansion" not in s
                and "expansionEndedAt" in s
            ),
            15,
            "4 partitions and the expansion's end in status",
            step=0.2,
        )
        assert settled
        status = _status(kube, "busy")
        lag_load = wait_for(  # lag per partition of today's count: 60 offsets on 4 partitions
            lambda: (s := _status(kube, "lagging")).get("currentPartitions") == 4 and s.get("load"),
            30,
            "the lagging topic grown to 4 with its lag in status",
            step=0.2,
        )
        listed = kube.custom.list_namespaced_custom_object(
            GROUP, VERSION, kube.namespace, "orderedtopicexpansions"
        )
        kube.custom.delete_namespaced_custom_object(GROUP, VERSION, kube.namespace, PLURAL, "busy")
        # about one record per transaction per partition at 10 records/s (0.5-0.67 measured: a
        # marker per record or two, which the offsets alone would count as records); the bound
        # leaves room for a loaded machine's longer transactions (status refreshes every 5 intervals)
        calm = wait_for(
            lambda: (s := _status(kube, "quiet")).get("load", {}).get("recordsPerOffset", 1) < 0.9 and s,
            15,
            "the quiet topic's records per offset",
            step=0.2,
        )
        wait_for(lambda: producer.partitions_for(busy) == 4, 15, "the producer to use 4")
        measuring = wait_for(  # the older one is gone: the younger decides
            lambda: _ready(kube, "second", "Measuring"), 20, "second measuring", step=0.2
        )
    finally:
        stop.set()
        writer.join(timeout=30)
        producer.close()
        operator.stop()
        print(operator.log_text()[-3000:])
    assert (decided["fromPartitions"], decided["toPartitions"], decided["expansion"]) == (2, 4, "busy-4")
    assert "records/s needs" in decided["reason"] and "2 -> 4" in decided["reason"], decided
    assert expansion["toPartitions"] == 4
    # the cooldown counts from the expansion's own end, not from when the operator noticed it
    own_end = _moment(expansion["startedAt"]) + timedelta(seconds=expansion["durationSeconds"])
    assert abs((_moment(status["expansionEndedAt"]) - own_end).total_seconds()) < 0.005, (status, expansion)
    (owned,) = [x for x in listed["items"] if x["metadata"]["name"] == "busy-4"]  # before "busy" was deleted
    owners = owned["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"]) for o in owners] == [("TopicAutoscaler", "busy")]
    load = status["load"]
    print("decision:", decided, "load:", load, "quiet:", calm["load"])
    assert 0 < load["recordsPerOffset"] <= 1 and load["recordsPerSecondPerPartition"] > 0
    assert load["bytesPerSecondPerPartition"] > 0
    assert kafka.admin.list_topics(busy, timeout=10).topics[busy].partitions.keys() == set(range(4))
    assert "Decided" in kube.event_reasons()

    assert calm
    assert calm.get("currentPartitions") == 2 and "lastDecision" not in calm, calm
    assert calm["desiredPartitions"] == 2 and calm["load"]["recordsPerSecondPerPartition"] < 20
    names = sorted(x["metadata"]["name"] for x in listed["items"])
    assert names == ["busy-4", "floor-4", "lagging-4"]  # none by "second"

    print("by lag:", by_lag, "load:", lag_load)
    assert by_lag is not None and (by_lag["fromPartitions"], by_lag["toPartitions"]) == (2, 4)
    assert "group 'billing' lag 60" in by_lag["reason"], by_lag
    assert lag_load and waiting and measuring
    assert lag_load["lagPerPartition"] == {"billing": LAGGED / 4}
    assert lag_load["recordsPerSecondPerPartition"] == 0  # the lag target alone grew it
    assert f"TopicAutoscaler {kube.namespace}/busy (the older)" in waiting, waiting
    assert "TopicHasAutoscaler" in kube.event_reasons()

    ready = [c for c in _status(kube, "nowhere").get("conditions", []) if c["type"] == "Ready"]
    assert [(c["status"], c["reason"]) for c in ready] == [("False", "TopicMissing")], ready
    assert "TopicMissing" in kube.event_reasons()
    ready = [c for c in _status(kube, "floor").get("conditions", []) if c["type"] == "Ready"]
    assert [(c["status"], c["reason"]) for c in ready] == [("False", "ExpansionEnded")], ready
    assert "delete it for the autoscaler to try again" in ready[0]["message"]
    assert len(kafka.admin.list_topics(floor, timeout=10).topics[floor].partitions) == 2

    read = read_topic(kafka.config(), busy, layout=KafkaKey(seq_field="seq"))
    verdict = check_topic(busy, read.records, read_epochs(kafka.config(), busy, epochs))
    print("verifier:", verdict.summary())
    assert read.unreadable == 0 and verdict.records > 0
    assert verdict.misplaced == 0 and verdict.order_violations == 0, verdict.examples
    assert verdict.duplicates == 0 and verdict.missing == 0, verdict.summary()


def test_a_deleted_autoscalers_expansion_in_flight_is_released_and_the_ended_one_stays_owned(
    kube: Kube, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the operator's delete handler does (``release``), on the API server alone: no operator
    runs, so the expansions keep the phases given them. Kubernetes' garbage collector then deletes
    the one still owned (once it watches the CRD: up to ~30 s after it was created, too slow to wait
    for here) and leaves the released one."""
    monkeypatch.setattr(operator_kube, "_client", kube.api)  # the handler's client: this testbed's
    _autoscaler(kube, "kept", "kept-topic")
    created = TopicAutoscaler.model_validate(
        kube.custom.get_namespaced_custom_object(GROUP, VERSION, kube.namespace, PLURAL, "kept")
    )
    expansions = Expansions(kube.custom, kube.namespace)
    for name, target in (("kept-4", 4), ("kept-8", 8)):
        kube.custom.create_namespaced_custom_object(
            GROUP, VERSION, kube.namespace, "orderedtopicexpansions", expansion_body(created, name, target)
        )
    kube.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, kube.namespace, "orderedtopicexpansions", "kept-4", {"status": {"phase": "Completed"}}
    )
    assert release(kube.namespace, "kept", str(created.metadata["uid"])) == ["kept-8"]  # Pending: in flight
    assert expansions.get("kept-8")["metadata"].get("ownerReferences", []) == []
    (owner,) = expansions.get("kept-4")["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("TopicAutoscaler", "kept")
