"""``ordo verify`` and ``ordo status`` against the Kafka testbed and its Kubernetes API server."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ordo.cli import main as ordo
from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLogWriter
from ordo.verify import JsonFields, ReadProgress, read_topic
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.resources import Groups

pytestmark = pytest.mark.testbed


def _numbered(kafka: KafkaHandle, topic: str, records: list[tuple[int, str, int]]) -> None:
    """(partition, key, number) records, in this order."""
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True})
    for partition, key, seq in records:
        producer.produce(topic, json.dumps({"k": key, "s": seq}).encode(), key.encode(), partition)
    assert producer.flush(30) == 0


def _expanded(kafka: KafkaHandle, epochs: str, topic: str) -> None:
    """Grow ``topic`` 2 -> 4 with thresholds at the current ends, as the operator records it."""
    consumer = Consumer(kafka.config(group_id="ends"))
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(2)}
    consumer.close()
    kafka.grow(topic, 4)
    writer = EpochLogWriter({"bootstrap.servers": kafka.bootstrap}, epochs)
    writer.write(EpochHistory.initial(topic, 2).begin_fence(4).publish(ends))
    writer.close()


def _verify(
    kafka: KafkaHandle, topic: str, epochs: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, Any]:
    code = ordo(
        ["verify", "--topic", topic, "--bootstrap", kafka.bootstrap, "--epoch-topic", epochs, "--json"]
    )
    return code, json.loads(capsys.readouterr().out)


def test_verify_follows_keys_across_an_expansion_and_finds_a_reordering(
    kafka: KafkaHandle, log_topics: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    epochs, _ = log_topics
    good, bad = kafka.create_topic(2), kafka.create_topic(2)
    # key a: #0, #1 in partition 0; after the expansion, #2 in the new partition 2
    _numbered(kafka, good, [(0, "a", 0), (1, "b", 0), (0, "a", 1)])
    _numbered(kafka, bad, [(0, "a", 0), (0, "a", 2)])  # #2 stored before the expansion ...
    _expanded(kafka, epochs, good)
    _expanded(kafka, epochs, bad)
    _numbered(kafka, good, [(2, "a", 2), (1, "b", 1)])
    _numbered(kafka, bad, [(2, "a", 1)])  # ... and #1 after it: out of order

    code, verdict = _verify(kafka, good, epochs, capsys)
    assert code == 0 and verdict["ok"] and verdict["records"] == 5 and verdict["epochs"] == 2, verdict
    code, verdict = _verify(kafka, bad, epochs, capsys)
    assert code == 1 and verdict["order_violations"] == 1 and "a #1" in verdict["examples"][0]


def test_verify_counts_duplicates_and_gaps_and_reports_a_missing_topic(
    kafka: KafkaHandle, log_topics: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    epochs, _ = log_topics
    topic = kafka.create_topic(1)
    _numbered(kafka, topic, [(0, "a", 0), (0, "a", 0), (0, "a", 2)])
    code, verdict = _verify(kafka, topic, epochs, capsys)
    assert code == 1 and (verdict["duplicates"], verdict["missing"]) == (1, 1)
    missing = kafka.topic("absent")
    assert ordo(["verify", "--topic", missing, "--bootstrap", kafka.bootstrap]) == 1
    assert "does not exist" in capsys.readouterr().err


def _produce(
    kafka: KafkaHandle, topic: str, records: Sequence[tuple[int, bytes | None, Any, dict[str, str]]]
) -> None:
    """(partition, Kafka key, JSON value, headers) records, in this order: an application's topic."""
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True})
    for partition, key, value, headers in records:
        payload = value if isinstance(value, bytes) else json.dumps(value).encode()
        producer.produce(topic, payload, key, partition, headers=list(headers.items()))
    assert producer.flush(30) == 0


def test_verify_on_an_application_topic_says_what_it_expected_and_reads_the_fields_it_is_given(
    kafka: KafkaHandle, log_topics: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    epochs, _ = log_topics
    topic = kafka.create_topic(2)
    orders = [(0, "c1", 0), (1, "c2", 0), (0, "c1", 1), (1, "c2", 1)]
    _produce(kafka, topic, [(p, c.encode(), {"customer": c, "order_no": n, "amount": 9.5}, {})
                            for p, c, n in orders])  # fmt: skip
    base = ["verify", "--topic", topic, "--bootstrap", kafka.bootstrap, "--epoch-topic", epochs]

    # the harness's formats are installed: none reads these records, and it says so in one line
    assert ordo(base) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "none of the 4 records" in err, err
    assert 'it reads JSON values {"k": key, "s": n, ...}' in err  # what it expected
    assert "JSON objects with fields amount, customer, order_no" in err  # what it found
    assert "This would read them: --key-field customer --seq-field order_no." in err

    assert ordo([*base, "--key-field", "customer", "--seq-field", "order_no"]) == 0
    out = capsys.readouterr().out
    assert 'reads JSON values {"customer": key, "order_no": n, ...}' in out
    assert "4 records of 2 keys" in out and "unreadable 0" in out and out.rstrip().endswith("OK"), out

    # the same orders keyed by Kafka, the number in the JSON value or in a header; one reordered
    _produce(kafka, topic, [(0, b"c1", {"customer": "c1", "order_no": 3}, {}),
                            (0, b"c1", {"customer": "c1", "order_no": 2}, {})])  # fmt: skip
    assert ordo([*base, "--seq-field", "order_no", "--json"]) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["order_violations"] == 1 and verdict["reads"].startswith("the Kafka record key")
    assert "c1 #2" in verdict["examples"][0]

    headed = kafka.create_topic(1)
    _produce(kafka, headed, [(0, b"acct", b"opaque", {"seq": str(n)}) for n in (0, 1, 3)]
             + [(0, b"acct", b"no header", {})])  # fmt: skip
    assert ordo(["verify", "--topic", headed, "--bootstrap", kafka.bootstrap, "--epoch-topic", epochs,
                 "--seq-header", "seq", "--json"]) == 1  # fmt: skip
    verdict = json.loads(capsys.readouterr().out)
    assert (verdict["records"], verdict["missing"], verdict["unreadable"]) == (3, 1, 1), verdict
    assert "not JSON objects (e.g. b'no header')" in verdict["unreadable_records"], verdict


def test_verify_by_the_kafka_key_alone_checks_each_keys_partition_per_epoch(
    kafka: KafkaHandle, log_topics: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    epochs, _ = log_topics
    good, bad = kafka.create_topic(2), kafka.create_topic(2)
    for topic in (good, bad):
        _produce(kafka, topic, [(0, b"a", b"x", {}), (1, b"b", b"x", {})])
        _expanded(kafka, epochs, topic)
    _produce(kafka, good, [(2, b"a", b"x", {}), (1, b"b", b"x", {})])  # a moved with the expansion
    _produce(kafka, bad, [(2, b"a", b"x", {}), (0, b"a", b"x", {})])  # a in two partitions of epoch 1
    argv = ["verify", "--bootstrap", kafka.bootstrap, "--epoch-topic", epochs, "--seq-offset", "--json"]
    assert ordo([*argv, "--topic", good]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert (verdict["records"], verdict["epochs"], verdict["numbered"]) == (4, 2, False), verdict
    assert ordo([*argv, "--topic", bad]) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["misplaced"] == 1 and verdict["duplicates"] == verdict["missing"] == 0, verdict


def test_a_read_of_a_topic_reports_how_far_it_is(kafka: KafkaHandle) -> None:
    """``ordo verify`` says how far a long read is (``read_topic``'s ``progress``): records read,
    and offsets read of those the partitions held when the read began."""
    topic = kafka.create_topic(2)
    _numbered(kafka, topic, [(i % 2, f"k{i % 50}", i // 50) for i in range(3000)])
    heard: list[ReadProgress] = []
    read = read_topic(
        kafka.config(), topic, layout=JsonFields("k", "s"), progress=heard.append, progress_every=0
    )
    assert len(read.records) == 3000
    assert heard and all(p.offsets_to_read == 3000 for p in heard)
    assert [p.records for p in heard] == sorted(p.records for p in heard)
    assert any(0 < p.records < 3000 for p in heard) and all(p.offsets <= 3000 for p in heard)


def test_status_shows_groups_from_the_api_and_gates_from_the_epoch_log(
    kafka: KafkaHandle, kube: Kube, log_topics: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    epochs, _ = log_topics
    groups = Groups(kube.custom, kube.namespace)
    groups.create("copy", 3, {"app": "copy"})
    status = {
        "generation": 2,
        "memberCount": 1,
        "members": [{"pod": "copy-0", "partitions": [0, 1, 2], "acked": 2}],
        "checkpoints": [{"partition": 0, "checkpoint": "42", "owner": "copy-0"}],
    }
    kube.custom.patch_namespaced_custom_object_status(
        "ordo.dev", "v1alpha1", kube.namespace, "producergroups", "copy", {"status": status}
    )
    topic = kafka.create_topic(2)
    _numbered(kafka, topic, [(0, "a", 0), (1, "b", 0), (1, "b", 1)])
    _expanded(kafka, epochs, topic)
    group = kafka.topic("readers")
    committer = Consumer(kafka.config(group_id=group))
    committer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)  # partition 0 done
    committer.close()

    argv = ["status", "--kubeconfig", str(kube.kubeconfig_path), "-n", kube.namespace,
            "--bootstrap", kafka.bootstrap, "--epoch-topic", epochs, "--topic", topic,
            "--consumer-group", group]  # fmt: skip
    assert ordo([*argv, "--json"]) == 0
    state = json.loads(capsys.readouterr().out)
    assert [g["metadata"]["name"] for g in state["groups"]] == ["copy"]
    assert state["groups"][0]["status"]["members"][0]["partitions"] == [0, 1, 2]
    assert [e["partitions"] for e in state["topics"][topic]["epochs"]] == [2, 4]
    passed = {(g["partition"], g["prior"]): (g["threshold"], g["passed"]) for g in state["gates"]}
    assert passed == {(2, 0): (1, True), (3, 1): (2, False)}

    assert ordo(argv) == 0
    text = capsys.readouterr().out
    assert "copy-0" in text and "0: 42" in text and "partition 1 up to 2" in text
