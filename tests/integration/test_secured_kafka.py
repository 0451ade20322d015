"""Strimzi-shaped credentials against the testbed's secured broker (SASL_SSL with SCRAM-SHA-512,
and mutual TLS): the operator configured from a KafkaUser's and the cluster CA's Secrets as Strimzi
makes them (on a resource, and as its own default from mounted Secrets), ``ordo status`` /
``ordo verify`` through ``-X`` and ``--command-config``, a ProducerGroup member process and
``ordo sandbox --bootstrap --command-config`` writing through SCRAM."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from ordo.cli import main as ordo
from ordo.connection import librdkafka_config
from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo_sandbox.kafka_settings import write_settings
from ordo_sandbox.scenario.sources import SourceVerdict, verify_sources
from ordo_testbed.kafka.secured import SCRAM_USER, TLS_USER, SecuredKafka
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.members import SimulatedMembers
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.pods import PodSet
from ordo_testbed.resources import Expansions, Groups, group_member_argv
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed

CA_SECRET = "ordo-cluster-ca-cert"
SCRAM = {"type": "scram-sha-512", "username": SCRAM_USER,
         "passwordSecret": {"secretName": SCRAM_USER, "password": "password"}}  # fmt: skip
MTLS = {
    "type": "tls",
    "certificateAndKey": {"secretName": TLS_USER, "certificate": "user.crt", "key": "user.key"},
}
TRUST = {"trustedCertificates": [{"secretName": CA_SECRET, "certificate": "ca.crt"}]}


def _topic(broker: SecuredKafka, partitions: int) -> str:
    """A new topic on the secured broker, made through its plain listener (the harness's own)."""
    name = f"secured-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.direct_bootstrap})
    admin.create_topics([NewTopic(name, partitions)])[name].result(30)
    wait_for(lambda: name in admin.list_topics(timeout=10).topics, 30, f"{name} in the metadata")
    return name


def _partitions(broker: SecuredKafka, topic: str) -> int:
    found = AdminClient({"bootstrap.servers": broker.direct_bootstrap}).list_topics(topic, timeout=10)
    return len(found.topics[topic].partitions)


def test_the_operator_expands_and_serves_a_group_through_scram_from_strimzi_secrets(
    secured_kafka: SecuredKafka, kube: Kube, operator_process: Callable[..., OperatorProcess]
) -> None:
    for name, data in secured_kafka.secrets().items():  # as Strimzi's User and Cluster operators make them
        kube.core.create_namespaced_secret(kube.namespace, {"metadata": {"name": name}, "stringData": data})
    connection = {"bootstrapServers": secured_kafka.scram_bootstrap, "authentication": SCRAM, "tls": TRUST}
    topic = _topic(secured_kafka, 2)
    operator = operator_process().start()
    expansions, groups = Expansions(kube.custom, kube.namespace), Groups(kube.custom, kube.namespace)
    expansions.create("grow", topic, 4, kafka=connection)
    status = expansions.wait_phase("grow", "Completed", 120)
    assert status["epoch"] == 1 and _partitions(secured_kafka, topic) == 4

    checkpoints = f"secured-checkpoints-{uuid.uuid4().hex[:8]}"
    groups.create("copy", 2, {"app": "copy"}, kafka=connection, checkpointTopic=checkpoints,
                  sessionTimeoutSeconds=5)  # fmt: skip
    members = SimulatedMembers(kube.api, kube.namespace, "copy", 5)
    try:
        members.renew(True)
        members.add(["copy-0"])
        settled = groups.wait_settled("copy", 1, 90, 2)
    finally:
        members.close()
    assert settled["members"][0]["partitions"] == [0, 1]
    # the operator made the group's checkpoint topic on the secured broker: it reads it through SCRAM
    assert (
        checkpoints
        in AdminClient({"bootstrap.servers": secured_kafka.direct_bootstrap}).list_topics(timeout=10).topics
    )
    assert "InvalidKafkaConnection" not in kube.event_reasons()
    assert secured_kafka.password not in operator.log_text()


def test_the_operators_default_kafka_over_mutual_tls_from_mounted_secrets(
    secured_kafka: SecuredKafka,
    kube: Kube,
    operator_process: Callable[..., OperatorProcess],
    tmp_path: Path,
) -> None:
    """As the chart runs it: kafka.authentication and kafka.tls as JSON, their Secrets mounted one
    folder each under ORDO_KAFKA_SECRETS_DIR."""
    mounted = tmp_path / "kafka-secrets"
    for name, data in secured_kafka.secrets().items():
        (mounted / name).mkdir(parents=True)
        for key, value in data.items():
            (mounted / name / key).write_text(value)
    operator = operator_process(
        ORDO_KAFKA_BOOTSTRAP=secured_kafka.tls_bootstrap,
        ORDO_KAFKA_AUTHENTICATION=json.dumps(MTLS),
        ORDO_KAFKA_TLS=json.dumps(TRUST),
        ORDO_KAFKA_SECRETS_DIR=str(mounted),
    ).start()
    topic = _topic(secured_kafka, 2)
    expansions = Expansions(kube.custom, kube.namespace)
    expansions.create("grow", topic, 3)  # no spec.kafka: the operator's default
    expansions.wait_phase("grow", "Completed", 120)
    assert _partitions(secured_kafka, topic) == 3
    assert "BEGIN PRIVATE KEY" not in operator.log_text()


def _scram_config(broker: SecuredKafka) -> dict[str, str]:
    secrets = broker.secrets()
    return librdkafka_config(broker.scram_bootstrap, SCRAM, TRUST, secrets=secrets.get)


def _expanded_topic_with_records(broker: SecuredKafka, epochs: str) -> str:
    """A topic grown 2 -> 4 with numbered records before the growth, its history written to
    ``epochs`` through the SCRAM listener, as the operator would."""
    topic = _topic(broker, 2)
    producer = Producer({**_scram_config(broker), "enable.idempotence": True})
    for partition, key, seq in [(0, "a", 0), (1, "b", 0), (1, "b", 1)]:
        producer.produce(topic, json.dumps({"k": key, "s": seq}).encode(), key.encode(), partition)
    assert producer.flush(30) == 0
    consumer = Consumer({**_scram_config(broker), "group.id": "ends"})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(2)}
    consumer.close()
    admin = AdminClient({"bootstrap.servers": broker.direct_bootstrap})  # held: its futures need it
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    writer = EpochLogWriter(_scram_config(broker), epochs)
    writer.write(EpochHistory.initial(topic, 2).begin_fence(4).publish(ends))
    writer.close()
    return topic


def _client_properties(broker: SecuredKafka, folder: Path) -> Path:
    """Kafka's tools' client.properties for the SCRAM listener, with the KafkaUser Secret's
    sasl.jaas.config as it is and the cluster CA Secret's ca.crt as a PEM truststore."""
    ca = folder / "ca.crt"
    ca.write_text(broker.cluster_ca_secret()["ca.crt"])
    properties = folder / "client.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.jaas.config={broker.scram_user_secret()['sasl.jaas.config']}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\n"
    )
    return properties


def test_status_and_verify_reach_the_secured_listeners_with_x_and_command_config(
    secured_kafka: SecuredKafka,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config: status reads Kafka alone
    epochs = f"secured-epochs-{uuid.uuid4().hex[:8]}"
    ensure_log_topics(
        AdminClient({"bootstrap.servers": secured_kafka.direct_bootstrap}), epochs, epochs + "-producers"
    )
    topic = _expanded_topic_with_records(secured_kafka, epochs)
    properties = _client_properties(secured_kafka, tmp_path)
    ca = tmp_path / "ca.crt"
    verify = ["verify", "--topic", topic, "--epoch-topic", epochs, "--json"]
    monkeypatch.setenv("ORDO_KAFKA_BOOTSTRAP", secured_kafka.scram_bootstrap)
    assert ordo([*verify, "--command-config", str(properties)]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["ok"] and verdict["records"] == 3, verdict

    # the mutual-TLS listener with -X alone, the client certificate as Strimzi's user.crt/user.key
    tls_user = tmp_path / "tls-user"
    tls_user.mkdir()
    for key, value in secured_kafka.tls_user_secret().items():
        (tls_user / key).write_text(value)
    x = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={ca}",
         "-X", f"ssl.certificate.location={tls_user / 'user.crt'}",
         "-X", f"ssl.key.location={tls_user / 'user.key'}"]  # fmt: skip
    status = [
        "status",
        "--bootstrap",
        secured_kafka.tls_bootstrap,
        *x,
        "--epoch-topic",
        epochs,
        "--topic",
        topic,
    ]
    assert ordo([*status, "--json"]) == 0
    state = json.loads(capsys.readouterr().out)
    assert [e["partitions"] for e in state["topics"][topic]["epochs"]] == [2, 4]

    # without the credentials, one line saying which Kafka could not be read
    assert ordo(["status", "--bootstrap", secured_kafka.tls_bootstrap, "-X", "security.protocol=SSL",
                 "-X", f"ssl.ca.location={ca}", "--epoch-topic", epochs]) == 1  # fmt: skip
    assert secured_kafka.tls_bootstrap in capsys.readouterr().err


def test_a_group_member_process_writes_through_scram_configured_from_the_strimzi_secret(
    secured_kafka: SecuredKafka,
    kube: Kube,
    pods: PodSet,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
    tmp_path: Path,
) -> None:
    """A real GroupProducer (the sandbox's group_member program, a process) given the connection
    as a 0600 file, never on its command line; the verifier reads its output through SCRAM."""
    for name, data in secured_kafka.secrets().items():
        kube.core.create_namespaced_secret(kube.namespace, {"metadata": {"name": name}, "stringData": data})
    connection = {"bootstrapServers": secured_kafka.scram_bootstrap, "authentication": SCRAM, "tls": TRUST}
    epochs, registry = log_topics  # the members' control topics, on the secured broker this time
    ensure_log_topics(AdminClient({"bootstrap.servers": secured_kafka.direct_bootstrap}), epochs, registry)
    topic = _topic(secured_kafka, 2)
    operator_process().start()
    groups = Groups(kube.custom, kube.namespace)
    groups.create("copy", 2, {"app": "copy"}, kafka=connection, sessionTimeoutSeconds=5,
                  checkpointTopic=f"secured-checkpoints-{uuid.uuid4().hex[:8]}")  # fmt: skip

    settings = _scram_config(secured_kafka)  # from the KafkaUser's and the cluster CA's Secrets
    config = write_settings(settings, tmp_path / "kafka.json")
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    argv = group_member_argv(secured_kafka.scram_bootstrap, topic, records=40, batch=10, rate=0,
                             epoch_topic=epochs, registry_topic=registry, kafka_config=config)  # fmt: skip
    member = pods.start("copy-0", argv, labels={"app": "copy"}, env={"ORDO_GROUP": "copy"}, grace=10)
    assert secured_kafka.password.encode() not in Path(f"/proc/{member.pid}/cmdline").read_bytes()
    groups.wait_settled("copy", 1, 90, 2)
    wanted = {0: 40, 1: 40}

    def copied() -> SourceVerdict | None:
        verdict = verify_sources(settings, topic, wanted, timeout=20)
        return verdict if verdict.records >= 80 else None

    verdict = wait_for(copied, 90, "the member's 80 records, read through SCRAM", step=1.0)
    assert verdict is not None
    assert verdict.ok and verdict.records == 80 and verdict.members == {"copy-0"}, verdict.summary()
    assert secured_kafka.password not in member.stdout() + member.stderr()


SANDBOX_SECONDS = 420  # a 20 s run; its testbed API server, operator and processes on a loaded machine


@pytest.mark.slow
@pytest.mark.timeout(SANDBOX_SECONDS + 60)
def test_the_sandbox_runs_through_the_scram_listener_with_command_config(
    secured_kafka: SecuredKafka, tmp_path: Path
) -> None:
    """``ordo sandbox --bootstrap <SCRAM listener> --command-config FILE``: its operator, members,
    consumers and verifier all reach Kafka through SCRAM, and the verdict holds."""
    properties = _client_properties(secured_kafka, tmp_path)
    topic, workdir, report = f"orders-{uuid.uuid4().hex[:6]}", tmp_path / "run", tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "ordo.cli", "sandbox", "--bootstrap", secured_kafka.scram_bootstrap,
         "--command-config", str(properties), "--topic", topic, "--duration", "20", "--no-spark",
         "--members", "2", "--rate", "60", "--report", str(report), "--workdir", str(workdir)],
        capture_output=True, text=True, timeout=SANDBOX_SECONDS,
    )  # fmt: skip
    print(done.stdout[-6000:], done.stderr[-3000:])
    assert report.exists(), done.stderr[-2000:]
    verdict = json.loads(report.read_text())
    assert done.returncode == 0 and verdict["ok"], [c for c in verdict["checks"] if not c["ok"]]
    assert verdict["kafka"]["records"] == verdict["orders"] > 0 and verdict["kafka"]["epochs"] == 2
    assert "✓ every order in Kafka exactly once" in done.stdout
    # the connection reached the members and consumers in a file of the owner's alone
    config = workdir / "kafka.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    settings = json.loads(config.read_text())
    assert settings["sasl.password"] == secured_kafka.password
    assert settings["bootstrap.servers"] == secured_kafka.scram_bootstrap
    logged = [p for p in workdir.rglob("*") if p.is_file() and p != config and p.suffix != ".db"]
    assert not [p for p in logged if secured_kafka.password in p.read_text(errors="replace")]
