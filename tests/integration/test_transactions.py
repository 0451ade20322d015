"""Pre-registered transactions (KIP-609) on OrderedProducer against the testbed broker."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from ordo.epochs.log import ensure_log_topics
from ordo.errors import ConfigError, TransactionScopeError, UndeclaredGroupError, UndeclaredPartitionError
from ordo.ordered_producer import OrderedProducer
from ordo.partitioners import murmur2_partition
from ordo.transactions import group_id_of
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import consume, end_offsets
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed


@pytest.fixture
def make(kafka: KafkaHandle) -> Iterator[Callable[..., OrderedProducer]]:
    epochs, registry = kafka.topic("epochs"), kafka.topic("producers")
    ensure_log_topics(kafka.admin, epochs, registry)
    made: list[OrderedProducer] = []

    def build(partitioner: str = "murmur2") -> OrderedProducer:
        producer = OrderedProducer(
            kafka.config(transactional_id=kafka.topic("tx"), linger_ms=1),
            partitioner=partitioner,
            epoch_topic=epochs,
            registry_topic=registry,
            session_timeout=3.0,
        )
        producer.init_transactions(15)
        made.append(producer)
        return producer

    yield build
    for producer in made:
        producer.close()


def _visible(kafka: KafkaHandle, topic: str, partitions: int) -> list[bytes]:
    """Every value a read_committed consumer sees, read to the end of each partition."""
    reader = Consumer(
        kafka.config(
            group_id=kafka.topic("r"),
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            enable_partition_eof=True,
        )
    )
    reader.subscribe([topic])
    try:
        return sorted(m.value() or b"" for m in consume(reader, until_eof=partitions))
    finally:
        reader.close()


def _ends(kafka: KafkaHandle, topic: str, partitions: int) -> list[int]:
    return list(end_offsets(kafka.bootstrap, topic, partitions).values())


def _group_metadata(kafka: KafkaHandle, group: str) -> object:
    consumer = Consumer(kafka.config(group_id=group))
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()


def test_a_declared_transaction_commits_records_and_offsets(
    kafka: KafkaHandle, make: Callable[..., OrderedProducer]
) -> None:
    out, source = kafka.create_topic(3), kafka.create_topic(1)
    producer = make()
    group = kafka.topic("g")
    with producer.transaction(partitions={out: [0, 1]}, group_id=group) as tx:
        tx.produce(out, b"a", partition=0)
        producer.produce(out, b"b", partition=1)  # the producer itself is held to the declaration too
        tx.send_offsets([TopicPartition(source, 0, 42)], _group_metadata(kafka, group))
    assert _visible(kafka, out, 3) == [b"a", b"b"]
    reader = Consumer(kafka.config(group_id=group))
    try:
        assert reader.committed([TopicPartition(source, 0)], 10)[0].offset == 42
    finally:
        reader.close()


def test_an_undeclared_partition_raises_at_once_sends_nothing_and_aborts(
    kafka: KafkaHandle, make: Callable[..., OrderedProducer]
) -> None:
    out = kafka.create_topic(3)
    producer = make("explicit")
    raised = pytest.raises(UndeclaredPartitionError, match=r"UNKNOWN_TOPIC_OR_PARTITION: partition 2")
    with raised, producer.transaction(partitions={out: [0, 1]}) as tx:
        tx.produce(out, b"kept?", partition=0)
        tx.produce(out, b"outside", partition=2)
    assert tx.aborted is not None
    assert producer.flush(10) == 0
    assert _ends(kafka, out, 3)[2] == 0, "the undeclared record reached the broker"
    assert _visible(kafka, out, 3) == [], "part of an aborted transaction is visible"
    with producer.transaction(partitions={out: [2]}):  # the producer is usable again
        producer.produce(out, b"next", partition=2)
    assert _visible(kafka, out, 3) == [b"next"]


def test_a_caught_violation_still_never_commits(
    kafka: KafkaHandle, make: Callable[..., OrderedProducer]
) -> None:
    out = kafka.create_topic(3)
    producer = make()
    key = next(k for k in (f"k{i}".encode() for i in range(100)) if murmur2_partition(k, 3) == 2)
    inside = next(k for k in (f"k{i}".encode() for i in range(100)) if murmur2_partition(k, 3) == 0)
    tx = producer.transaction(partitions={out: [0, 1]})
    with tx:
        tx.produce(out, b"inside", key=inside)  # opens partition 0 to the C path
        with pytest.raises(UndeclaredPartitionError, match="partition 2"):
            tx.produce(out, b"hashed outside", key=key)  # murmur2 put this key in partition 2
        with pytest.raises(TransactionScopeError, match="aborted"):
            tx.produce(out, b"after", partition=0)
        with pytest.raises(TransactionScopeError, match="aborted"):  # the C path is closed too
            tx.produce(out, b"after", key=inside)
        with pytest.raises(TransactionScopeError, match="cannot commit"):
            tx.commit()
    assert _ends(kafka, out, 3) == [0, 0, 0]


def test_a_declared_transactions_records_take_the_c_path_and_undeclared_ones_still_raise(
    kafka: KafkaHandle, make: Callable[..., OrderedProducer]
) -> None:
    out = kafka.create_topic(3)
    producer = make()
    fast: Any = producer.produce
    assert hasattr(fast, "fast_calls"), "ordo._fastproduce is not built: `pip install -e .` compiles it"
    keys = [k for k in (f"k{i}".encode() for i in range(100)) if murmur2_partition(k, 3) != 2][:10]
    outside = next(k for k in (f"k{i}".encode() for i in range(100)) if murmur2_partition(k, 3) == 2)
    assert producer.partitions_of(out, keys) == {0, 1}
    with producer.transaction(partitions={out: producer.partitions_of(out, keys)}) as tx:
        for _ in range(10):
            for key in keys:
                tx.produce(out, b"v", key=key)
    # Python serves the stamped first record of partitions 0 and 1 in this epoch; C the rest
    assert fast.fast_calls == 10 * len(keys) - 2
    assert len(_visible(kafka, out, 3)) == 10 * len(keys)
    with (
        pytest.raises(UndeclaredPartitionError, match="partition 2"),
        producer.transaction(partitions={out: [0, 1]}) as tx,
    ):
        tx.produce(out, b"outside", key=outside)
    assert fast.fast_calls == 10 * len(keys) - 2 and _ends(kafka, out, 3)[2] == 0


def test_partitions_of_declares_what_the_partitioner_will_choose(
    kafka: KafkaHandle, make: Callable[..., OrderedProducer]
) -> None:
    out = kafka.create_topic(4)
    hashed, rotating, explicit = make(), make("round_robin"), make("explicit")
    keys = [f"k{i}" for i in range(3)]  # str keys are placed as their UTF-8 bytes
    assert hashed.partitions_of(out, keys) == {murmur2_partition(k.encode(), 4) for k in keys}
    assert hashed.partitions_of(out, iter([b"a", None])) == {0, 1, 2, 3}  # a keyless record: anywhere
    assert rotating.partitions_of(out, [b"a"]) == {0, 1, 2, 3}  # round_robin ignores keys
    with pytest.raises(ConfigError, match="explicit partitioner takes each record's partition"):
        explicit.partitions_of(out, [b"a"])
    with pytest.raises(ConfigError, match="does not exist"):
        hashed.partitions_of(kafka.topic("missing"), [b"a"])


def test_offsets_of_another_group_raise_invalid_group_id_and_abort(
    kafka: KafkaHandle, make: Callable[..., OrderedProducer]
) -> None:
    out, source = kafka.create_topic(1), kafka.create_topic(1)
    producer = make()
    declared, other = kafka.topic("g"), kafka.topic("other")
    raised = pytest.raises(UndeclaredGroupError, match=r"INVALID_GROUP_ID: offsets of group 'other")
    with raised, producer.transaction(partitions={out: [0]}, group_id=declared) as tx:
        tx.produce(out, b"x")
        tx.send_offsets([TopicPartition(source, 0, 7)], _group_metadata(kafka, other))
    assert _visible(kafka, out, 1) == []
    reader = Consumer(kafka.config(group_id=other))
    try:
        assert reader.committed([TopicPartition(source, 0)], 10)[0].offset < 0
    finally:
        reader.close()


def test_declared_partitions_are_checked_against_metadata_at_begin(
    kafka: KafkaHandle, make: Callable[..., OrderedProducer]
) -> None:
    out = kafka.create_topic(3)
    producer = make()
    with pytest.raises(
        UndeclaredPartitionError, match=r"partitions \[3, 9\] of .* do not exist \(it has 3\)"
    ):
        producer.transaction(partitions={out: [0, 3, 9]}).__enter__()
    with pytest.raises(UndeclaredPartitionError, match="does not exist"):
        producer.transaction(partitions={kafka.topic("missing"): [0]}).__enter__()
    with pytest.raises(ConfigError, match="at least one topic"):
        producer.transaction(partitions={})
    with producer.transaction(partitions={out: [1]}):  # nothing was begun by the refusals
        producer.produce(out, b"ok", partition=1)
    assert _visible(kafka, out, 3) == [b"ok"]


def test_round_robin_rotates_over_the_declared_partitions_only(
    kafka: KafkaHandle, make: Callable[..., OrderedProducer]
) -> None:
    out = kafka.create_topic(5)
    producer = make("round_robin")
    with producer.transaction(partitions={out: [1, 3]}) as tx:
        for _ in range(10):
            tx.produce(out, b"r", key=b"any")
    # 5 records + the commit marker each (the broker writes the markers after commit returns)
    wait_for(lambda: _ends(kafka, out, 5) == [0, 6, 0, 6, 0], 10, "ends [0, 6, 0, 6, 0]")


def test_an_exception_in_the_body_aborts(kafka: KafkaHandle, make: Callable[..., OrderedProducer]) -> None:
    out = kafka.create_topic(1)
    producer = make()
    with pytest.raises(RuntimeError, match="boom"), producer.transaction(partitions={out: [0]}) as tx:
        tx.produce(out, b"x")
        raise RuntimeError("boom")
    assert tx.aborted is not None and "boom" in tx.aborted
    assert _visible(kafka, out, 1) == []


def test_group_id_is_read_from_the_consumers_group_metadata(kafka: KafkaHandle) -> None:
    assert group_id_of(_group_metadata(kafka, "billing-7")) == "billing-7"
    with pytest.raises(ValueError, match="consumer_group_metadata"):
        group_id_of(b"nonsense")


def test_a_declared_transaction_still_registers_its_partitions_as_records_are_sent(
    kafka: KafkaHandle,
) -> None:
    """What the README and ordo.transactions say pre-registration cannot save, as librdkafka
    sends it: each declared partition is still registered by an AddPartitionsToTxn request once
    records go to it, over the first transaction protocol (Produce below v12: no KIP-890 implicit
    enrollment). If a librdkafka upgrade changes this, this test says the docs must change."""
    import logging
    import re

    epochs, registry = kafka.topic("epochs"), kafka.topic("producers")
    ensure_log_topics(kafka.admin, epochs, registry)
    sent: list[str] = []

    class Requests(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            sent.extend(re.findall(r"Sent (\w+Request \(v\d+)", record.getMessage()))

    logger = logging.getLogger(f"test.protocol.{kafka.topic('log')}")
    logger.addHandler(Requests())
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    topic = kafka.create_topic(3)
    producer = OrderedProducer(
        kafka.config(transactional_id=kafka.topic("tx"), debug="protocol", logger=logger),
        epoch_topic=epochs, registry_topic=registry, session_timeout=3.0,
    )  # fmt: skip
    try:
        producer.init_transactions(15)
        with producer.transaction(partitions={topic: [0, 1, 2]}) as tx:
            for partition in range(3):
                tx.produce(topic, b"v", partition=partition)
            tx.commit()
        producer.poll(0)  # hands the last log lines over
    finally:
        producer.close()
    assert any(s.startswith("AddPartitionsToTxnRequest") for s in sent), sent
    produce_versions = {int(s.rsplit("v", 1)[1]) for s in sent if s.startswith("ProduceRequest")}
    assert produce_versions and max(produce_versions) < 12, produce_versions
