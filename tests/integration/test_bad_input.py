"""Bad input, table-driven, each through the surface a user meets: the CRD schema in the API
server, the operator's condition and Event, the SDK's exception, and the control
topics' readers. Each case: a clear error naming the field or record, nothing changed, nothing
lost; and the operator keeps serving other objects (the last test)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kubernetes.client.exceptions import ApiException

from ordo.api import API_GROUP
from ordo.api.common import PAUSE_ANNOTATION, VERSION
from ordo.epochs import EpochHistory
from ordo.epochs.liveness import ProducerLiveness, ProducerReport
from ordo.epochs.log import EpochLog, ensure_log_topics
from ordo.errors import ConfigError, ProducerClosedError, UndeclaredPartitionError
from ordo.group.checkpoints import Checkpoint, CheckpointLog, ensure_checkpoint_topic
from ordo.ordered_producer import OrderedProducer
from ordo_testbed.kafka import KafkaTestbed
from ordo_testbed.kafka.testing import end_offsets
from ordo_testbed.kube.fixtures import KubeCluster
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Autoscalers, Expansions, Groups
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed


@dataclass
class World:
    """One namespace, one operator and one set of log topics for the whole table."""

    api: Any
    namespace: str
    bootstrap: str
    admin: AdminClient
    operator: OperatorProcess
    epochs: str
    registry: str

    def topic(self, partitions: int | None = None) -> str:
        name = f"bad-{uuid.uuid4().hex[:8]}"
        if partitions:
            self.admin.create_topics([NewTopic(name, partitions)])[name].result(15)
            # CreateTopics answers before the metadata lists the topic: "unchanged" compares with it
            wait_for(lambda: self.count(name) == partitions, 15, f"{name} in the metadata")
        return name

    def count(self, topic: str) -> int | None:
        found = self.admin.list_topics(timeout=10).topics.get(topic)
        return len(found.partitions) if found is not None and found.error is None else None

    @property
    def custom(self) -> Any:
        import kubernetes

        return kubernetes.client.CustomObjectsApi(self.api)

    @property
    def expansions(self) -> Expansions:
        return Expansions(self.custom, self.namespace)

    @property
    def groups(self) -> Groups:
        return Groups(self.custom, self.namespace)

    def events_of(self, name: str) -> dict[str, str]:
        import kubernetes

        core = kubernetes.client.CoreV1Api(self.api)
        items = core.list_namespaced_event(self.namespace).items
        return {str(e.reason): str(e.message) for e in items if e.involved_object.name == name}

    def write(self, topic: str, key: bytes, value: bytes) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap})
        producer.produce(topic, value, key)
        assert producer.flush(10) == 0


@pytest.fixture(scope="module")
def world(
    kube_cluster: KubeCluster, kafka_testbed: KafkaTestbed | None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    if kafka_testbed is None or kube_cluster.server is None:
        pytest.skip("the table runs on the testbed (its schema and operator cases need its API server)")
    import kubernetes

    api = kube_cluster.client()
    namespace = f"bad-{uuid.uuid4().hex[:8]}"
    core: Any = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})
    admin = AdminClient({"bootstrap.servers": kafka_testbed.bootstrap})
    epochs, registry = f"bad-epochs-{namespace}", f"bad-producers-{namespace}"
    ensure_log_topics(admin, epochs, registry)
    operator = OperatorProcess(
        kube_cluster.kubeconfig_path,
        kafka_testbed.bootstrap,
        namespaces=[namespace],
        env={"ORDO_EPOCH_TOPIC": epochs, "ORDO_REGISTRY_TOPIC": registry, "ORDO_MAX_PARTITIONS": "64"},
        log_path=Path(tmp_path_factory.mktemp("bad-input")) / "operator.log",
    ).start()
    try:
        yield World(api, namespace, kafka_testbed.bootstrap, admin, operator, epochs, registry)
    finally:
        operator.stop()
        print(operator.log_text()[-3000:])
        api.close()


# --- the CRD schema: refused at apply time, naming the field; nothing is stored ---------------


def _refused(world: World, plural: str, kind: str, spec: dict[str, Any], field: str) -> None:
    name = f"refused-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": f"{API_GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}, "spec": spec}
    with pytest.raises(ApiException) as raised:
        world.custom.create_namespaced_custom_object(API_GROUP, VERSION, world.namespace, plural, body)
    assert raised.value.status == 422, raised.value
    assert field in str(raised.value.body), raised.value.body
    with pytest.raises(ApiException) as missing:
        world.custom.get_namespaced_custom_object(API_GROUP, VERSION, world.namespace, plural, name)
    assert missing.value.status == 404, "nothing was stored"


def _group(spec: dict[str, Any]) -> dict[str, Any]:
    return {"sourcePartitions": 4, "selector": {"matchLabels": {"app": "x"}}, **spec}


def _expansion(spec: dict[str, Any]) -> dict[str, Any]:
    return {"topic": "orders", "partitions": 6, **spec}


def _g(field: str, value: Any) -> tuple[str, str, dict[str, Any], str]:
    return "producergroups", "ProducerGroup", _group({field: value}), field


def _x(field: str, value: Any) -> tuple[str, str, dict[str, Any], str]:
    return "orderedtopicexpansions", "OrderedTopicExpansion", _expansion({field: value}), field


SCHEMA_CASES: dict[str, tuple[str, str, dict[str, Any], str]] = {
    "group: zero source partitions": _g("sourcePartitions", 0),
    "group: negative source partitions": _g("sourcePartitions", -3),
    "group: huge source partitions": _g("sourcePartitions", 10**9),
    "group: session timeout 0": _g("sessionTimeoutSeconds", 0),
    "group: session timeout above an hour": _g("sessionTimeoutSeconds", 86400),
    "group: unknown assignment strategy": _g("assignment", "random"),
    "expansion: zero partitions": _x("partitions", 0),
    "expansion: negative partitions": _x("partitions", -6),
    "expansion: huge partitions": _x("partitions", 10**9),
    "expansion: topic name with spaces": _x("topic", "bad topic"),
    "expansion: fence timeout 0": _x("fenceTimeoutSeconds", 0),
}


@pytest.mark.parametrize("case", list(SCHEMA_CASES))
def test_the_schema_refuses(world: World, case: str) -> None:
    _refused(world, *SCHEMA_CASES[case])


# --- the operator: a Failed/Degraded condition and a Warning Event; nothing changed -----------


def _failed_expansion(world: World, topic: str, partitions: int, reason: str, text: str, **spec: Any) -> None:
    before = world.count(topic)
    name = f"x-{uuid.uuid4().hex[:6]}"
    world.expansions.create(name, topic, partitions, **spec)
    status = world.expansions.wait_phase(name, "Failed", 60)
    assert text in status["message"], status
    failed = [c for c in status["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["status"] == "True" and failed[0]["reason"] == reason
    wait_for(lambda: reason in world.events_of(name), 15, f"a {reason} event")
    assert world.count(topic) == before, "the topic is unchanged"


def _degraded_group(world: World, reason: str, text: str, **spec: Any) -> None:
    name = f"g-{uuid.uuid4().hex[:6]}"
    world.groups.create(name, 2, {"app": name}, **spec)

    def degraded() -> dict[str, Any] | None:
        for c in world.groups.status(name).get("conditions") or []:
            if c["type"] == "Degraded" and c["status"] == "True" and c["reason"] == reason:
                return dict(c)
        return None

    condition = wait_for(degraded, 60, f"Degraded/{reason}")
    assert condition is not None and text in condition["message"], condition
    wait_for(lambda: reason in world.events_of(name), 15, f"a {reason} event")


def _failed(world: World, now: int | None, partitions: int, reason: str, text: str) -> None:
    _failed_expansion(world, world.topic(now), partitions, reason, text)


def _missing_secret_expansion(world: World) -> None:
    kafka = {"bootstrapServers": world.bootstrap, "secretRef": {"name": "absent-secret"}}
    _failed_expansion(
        world, world.topic(3), 6, "InvalidKafkaConnection", "'absent-secret' not found", kafka=kafka
    )


def _strimzi_secret_as_raw_options(world: World) -> None:
    """A Strimzi KafkaUser Secret given where raw librdkafka options go: refused, naming the field."""
    import kubernetes

    core: Any = kubernetes.client.CoreV1Api(world.api)
    core.create_namespaced_secret(
        world.namespace,
        {"metadata": {"name": "strimzi-user"}, "stringData": {"password": "x", "sasl.jaas.config": "y"}},
    )
    kafka = {"bootstrapServers": world.bootstrap, "secretRef": {"name": "strimzi-user"}}
    _failed_expansion(
        world, world.topic(3), 6, "InvalidKafkaConnection",
        "passwordSecret: {secretName: strimzi-user, password: password}} instead of secretRef", kafka=kafka,
    )  # fmt: skip


def _credentials_in_expansion(world: World) -> None:
    topic = world.topic(3)
    world.expansions.create(
        "leaky", topic, 6, kafka={"bootstrapServers": "k:9092", "config": {"sasl.password": "x"}}
    )
    status = wait_for(lambda: world.expansions.status("leaky").get("phase") == "Failed", 60, "Failed")
    assert status
    assert "credentials must come from a Secret" in world.expansions.status("leaky")["message"]
    wait_for(lambda: "InvalidSpec" in world.events_of("leaky"), 15, "an InvalidSpec event")
    assert world.count(topic) == 3


def _second_expansion_to_the_same_count(world: World) -> None:
    topic = world.topic(3)
    world.expansions.create("first-of-two", topic, 4)
    world.expansions.wait_phase("first-of-two", "Completed", 60)
    _failed_expansion(world, topic, 4, "NotLarger", "must be larger than today's 4")


OPERATOR_CASES: dict[str, Callable[[World], None]] = {
    "expansion: target not larger": lambda w: _failed(w, 3, 3, "NotLarger", "must be larger"),
    "expansion: shrinking": lambda w: _failed(w, 3, 2, "NotLarger", "must be larger"),
    "expansion: above the maximum": lambda w: _failed(w, 3, 65, "TooManyPartitions", "maximum of 64"),
    "expansion: unknown topic": lambda w: _failed(w, None, 6, "TopicNotFound", "does not exist"),
    "expansion: missing Secret": _missing_secret_expansion,
    "expansion: a Strimzi Secret as raw options": _strimzi_secret_as_raw_options,
    "expansion: a second one of a topic to the same count": _second_expansion_to_the_same_count,
    "group: selector matching nothing": lambda w: _degraded_group(w, "NoMembers", "matches no pod"),
    "group: credentials in kafka.config": lambda w: _degraded_group(
        w, "InvalidSpec", "credentials must come from a Secret",
        kafka={"bootstrapServers": w.bootstrap, "config": {"sasl.password": "x"}},
    ),
    "expansion: credentials in kafka.config": _credentials_in_expansion,
    "group: missing Secret": lambda w: _degraded_group(
        w, "InvalidKafkaConnection", "'absent-secret' not found",
        kafka={"bootstrapServers": w.bootstrap, "secretRef": {"name": "absent-secret"}},
    ),
    "group: the Secret its passwordSecret names is missing": lambda w: _degraded_group(
        w, "InvalidKafkaConnection", "authentication.passwordSecret: Secret 'absent-user' not found",
        kafka={"bootstrapServers": w.bootstrap, "authentication": {"type": "scram-sha-512", "username": "u",
               "passwordSecret": {"secretName": "absent-user", "password": "password"}}},
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(OPERATOR_CASES))
def test_the_operator_refuses(world: World, case: str) -> None:
    OPERATOR_CASES[case](world)


# --- the SDK: an exception naming what is wrong; nothing sent ----------------------------------


def _producer(world: World, **kw: Any) -> OrderedProducer:
    return OrderedProducer(
        {"bootstrap.servers": world.bootstrap}, epoch_topic=world.epochs, registry_topic=world.registry, **kw
    )


def _unknown_partitioner(world: World) -> None:
    with pytest.raises(ConfigError, match="unknown partitioner 'bogus'"):
        _producer(world, partitioner="bogus")


def _closed_producer(world: World) -> None:
    producer = _producer(world)
    producer.close()
    with pytest.raises(ProducerClosedError, match="closed"):
        producer.produce(world.topic(1), b"v", key=b"k")


def _outside_declared_partitions(world: World) -> None:
    topic = world.topic(3)
    config = {"bootstrap.servers": world.bootstrap, "transactional.id": f"tx-{topic}"}
    producer = OrderedProducer(config, epoch_topic=world.epochs, registry_topic=world.registry)
    try:
        producer.init_transactions(15)
        with (
            pytest.raises(UndeclaredPartitionError, match="partition 2"),
            producer.transaction({topic: [0]}) as tx,
        ):
            tx.produce(topic, b"v", partition=2)
    finally:
        producer.close()
    assert _committed_count(world, topic) == 0, "nothing of it was written"


def _committed_count(world: World, topic: str) -> int:
    return sum(end_offsets(world.bootstrap, topic, 3).values())


SDK_CASES: dict[str, Callable[[World], None]] = {
    "producer: unknown partitioner": _unknown_partitioner,
    "producer: used after close": _closed_producer,
    "transaction: a partition outside the declared ones": _outside_declared_partitions,
}
# Checkpoints of the wrong type and source partitions not owned are refused by GroupProducer:
# tests/integration/test_group_producer.py (CheckpointError "must be a str", NotOwnedError).


@pytest.mark.parametrize("case", list(SDK_CASES))
def test_the_sdk_refuses(world: World, case: str) -> None:
    SDK_CASES[case](world)


# --- control records: ignored by every reader, counted and logged; the good value stays --------


def _history(topic: str) -> bytes:
    return EpochHistory.initial(topic, 3).model_dump_json().encode()


def _epoch_record(bad: Callable[[str], bytes]) -> Callable[[World], None]:
    def run(world: World) -> None:
        topic = world.topic(3)
        world.write(world.epochs, topic.encode(), _history(topic))
        world.write(world.epochs, topic.encode(), bad(topic))
        log = EpochLog({"bootstrap.servers": world.bootstrap}, world.epochs)
        try:
            assert log.catch_up(20)
            assert log.catch_up(20)
            assert log.history(topic) == EpochHistory.initial(topic, 3), "the good history stays"
            assert log.invalid_records >= 1
        finally:
            log.close()

    return run


def _future_then_stale(topic: str) -> bytes:
    """A history that drops epochs the log already published (a replayed or forged record)."""
    return _history(topic)  # written after a longer one below


def _stale_history(world: World) -> None:
    topic = world.topic(3)
    grown = json.loads(_history(topic))
    grown["epochs"].append(
        {"epoch": 1, "partitions": 6, "state": "active", "from_partitions": 3,
         "thresholds": {"0": 0, "1": 0, "2": 0}, "prior": {"3": [0], "4": [1], "5": [2]}}
    )  # fmt: skip
    world.write(world.epochs, topic.encode(), json.dumps(grown).encode())
    world.write(world.epochs, topic.encode(), _future_then_stale(topic))
    log = EpochLog({"bootstrap.servers": world.bootstrap}, world.epochs)
    try:
        assert log.catch_up(20)
        history = log.history(topic)
        assert history is not None and history.active.epoch == 1, "the longer history stays"
        assert log.invalid_records >= 1
    finally:
        log.close()


def _registry_record(bad: bytes) -> Callable[[World], None]:
    def run(world: World) -> None:
        good = ProducerReport(
            producer_id="p-good", topics=("t",), session_timeout_ms=60_000, reported_at_ms=1
        )
        world.write(world.registry, b"p-good", good.model_dump_json().encode())
        world.write(world.registry, b"p-good", bad)
        registry = ProducerLiveness({"bootstrap.servers": world.bootstrap}, world.registry)
        try:
            assert registry.catch_up(20)
            assert registry.get("p-good") == good, "the last valid report stays"
            assert registry.invalid_records >= 1
        finally:
            registry.close()

    return run


def _checkpoint_record(bad: bytes) -> Callable[[World], None]:
    def run(world: World) -> None:
        topic = world.topic()
        ensure_checkpoint_topic(world.admin, topic)
        good = Checkpoint.now("42", "m-0", 1)
        world.write(topic, b"ns/g/0", good.encode())
        world.write(topic, b"ns/g/0", bad)
        log = CheckpointLog({"bootstrap.servers": world.bootstrap}, topic)
        try:
            assert log.catch_up(20)
            assert log.of("ns", "g", 0) == good, "the last valid checkpoint stays"
            assert log.invalid_records >= 1
        finally:
            log.close()

    return run


def _v2(model: dict[str, Any]) -> bytes:
    return json.dumps({**model, "schema_version": 2}).encode()


RECORD_CASES: dict[str, Callable[[World], None]] = {
    "epoch log: garbage bytes": _epoch_record(lambda _t: b"\x00\xffnot json"),
    "epoch log: wrong schema version": _epoch_record(lambda t: _v2(json.loads(_history(t)))),
    "epoch log: a history dropping published epochs": _stale_history,
    "epoch log: a key naming another topic": _epoch_record(lambda _t: _history("another-topic")),
    "registry: garbage bytes": _registry_record(b"{{{"),
    "registry: wrong schema version": _registry_record(
        _v2({"producer_id": "p-good", "topics": ["t"], "session_timeout_ms": 60000, "reported_at_ms": 2})
    ),
    "registry: a report claiming another producer's key": _registry_record(
        ProducerReport(producer_id="p-evil", topics=("t",), session_timeout_ms=60_000, reported_at_ms=3)
        .model_dump_json()
        .encode()
    ),
    "checkpoint topic: garbage bytes": _checkpoint_record(b"\x00garbage"),
    "checkpoint topic: unknown fields": _checkpoint_record(
        json.dumps(
            {"checkpoint": "99", "member": "x", "generation": 1, "written_at_ms": 1, "evil": 1}
        ).encode()
    ),
}


@pytest.mark.parametrize("case", list(RECORD_CASES))
def test_malformed_control_records_are_ignored(world: World, case: str) -> None:
    RECORD_CASES[case](world)


def test_the_table_has_at_least_twenty_cases() -> None:
    assert len(SCHEMA_CASES) + len(OPERATOR_CASES) + len(SDK_CASES) + len(RECORD_CASES) >= 20


def test_the_operator_still_serves_after_the_table(world: World) -> None:
    """After every bad object and record above, a good expansion still completes."""
    topic = world.topic(2)
    world.expansions.create("good-after-bad", topic, 4)
    status = world.expansions.wait_phase("good-after-bad", "Completed", 60)
    assert (status["fromPartitions"], status["toPartitions"]) == (2, 4)
    assert world.count(topic) == 4
    assert world.operator.running


# --- a pause: left as it is until the annotation goes (not bad input: the same operator) ---------


def _create_paused(world: World, plural: str, kind: str, name: str, spec: dict[str, Any]) -> None:
    metadata = {"name": name, "annotations": {PAUSE_ANNOTATION: "true"}}
    body = {"apiVersion": f"{API_GROUP}/{VERSION}", "kind": kind, "metadata": metadata, "spec": spec}
    world.custom.create_namespaced_custom_object(API_GROUP, VERSION, world.namespace, plural, body)


def _unpause(world: World, plural: str, name: str) -> None:
    patch = {"metadata": {"annotations": {PAUSE_ANNOTATION: None}}}
    world.custom.patch_namespaced_custom_object(API_GROUP, VERSION, world.namespace, plural, name, patch)


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def test_paused_resources_are_left_as_they_are_until_the_annotation_goes(world: World) -> None:
    """ordo.dev/pause-reconciliation: "true" (as Strimzi's): an expansion not begun stays Pending
    and grows nothing, a group plans no assignment, an autoscaler decides nothing, each saying so in
    its status; removing the annotation resumes each."""
    topic = world.topic(2)
    scaler_spec = {"topic": topic, "maxPartitions": 8, "targets": {"recordsPerSecondPerPartition": 1}}
    group_spec = _group({"selector": {"matchLabels": {"app": "paused"}}})
    _create_paused(
        world,
        "orderedtopicexpansions",
        "OrderedTopicExpansion",
        "paused-grow",
        {"topic": topic, "partitions": 4},
    )
    _create_paused(world, "producergroups", "ProducerGroup", "paused-group", group_spec)
    _create_paused(world, "topicautoscalers", "TopicAutoscaler", "paused-scaler", scaler_spec)
    autoscalers = Autoscalers(world.custom, world.namespace)

    def expansion() -> dict[str, Any]:
        return world.expansions.status("paused-grow")

    def group_paused() -> str | None:
        return _condition(world.groups.status("paused-group"), "ReconciliationPaused").get("status")

    def scaler_ready() -> str | None:
        return _condition(autoscalers.status("paused-scaler"), "Ready").get("reason")

    wait_for(lambda: "paused" in expansion().get("message", ""), 30, "the expansion to say it is paused")
    assert expansion().get("phase") == "Pending" and world.count(topic) == 2
    wait_for(lambda: group_paused() == "True", 30, "the group's ReconciliationPaused condition")
    assert not world.groups.status("paused-group").get("generation"), "no assignment planned"
    wait_for(lambda: scaler_ready() == "ReconciliationPaused", 30, "the autoscaler's Ready False, paused")
    assert "lastDecision" not in autoscalers.status("paused-scaler")

    for plural, name in (
        ("orderedtopicexpansions", "paused-grow"),
        ("producergroups", "paused-group"),
        ("topicautoscalers", "paused-scaler"),
    ):
        _unpause(world, plural, name)
    status = world.expansions.wait_phase("paused-grow", "Completed", 60)
    assert (status["fromPartitions"], status["toPartitions"]) == (2, 4) and world.count(topic) == 4
    wait_for(lambda: group_paused() == "False", 30, "the group to resume")
    assert "ReconciliationResumed" in world.events_of("paused-group")
    wait_for(lambda: scaler_ready() not in (None, "ReconciliationPaused"), 30, "the autoscaler to resume")
    autoscalers.delete("paused-scaler")
