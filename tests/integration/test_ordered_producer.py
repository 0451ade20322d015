"""OrderedProducer against the testbed broker: partitions by epoch, fences, resumes, self-fences."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client import REGISTRY

from ordo.epochs import EpochHistory, stamped_epoch
from ordo.epochs.liveness import ProducerLiveness
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo.errors import ConfigError, ProduceBlockedError, ProducerClosedError
from ordo.ordered_producer import OrderedProducer
from ordo.partitioners import murmur2_partition
from ordo_testbed.kafka import Fault
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import consume, records_per_partition
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed


@dataclass
class Setup:
    kafka: KafkaHandle
    topic: str
    epochs: str
    registry_topic: str
    writer: EpochLogWriter
    registry: ProducerLiveness

    def producer(self, **kw: object) -> OrderedProducer:
        options: dict[str, object] = {"session_timeout": 3.0, "block_timeout": 10.0}
        options.update(kw)
        return OrderedProducer(
            self.kafka.config(linger_ms=1),
            epoch_topic=self.epochs,
            registry_topic=self.registry_topic,
            **options,  # type: ignore[arg-type]
        )

    def grow_broker(self, count: int) -> None:
        self.kafka.grow(self.topic, count)

    def fence(self, history: EpochHistory, producer_id: str, count: int) -> EpochHistory:
        """Begin a fence to ``count`` partitions and wait for ``producer_id`` to acknowledge it."""
        fenced = history.begin_fence(count)
        self.writer.write(fenced)
        assert self.registry.wait_for(
            lambda: (r := self.registry.get(producer_id)) is not None and r.fenced.get(self.topic) == 1, 10
        ), "the producer acknowledges the fence in the registry"
        return fenced


def _produce_in_background(
    producer: OrderedProducer, topic: str, value: bytes, key: bytes
) -> tuple[threading.Thread, threading.Event]:
    """One produce() on its own thread; the event is set once it returned."""
    done = threading.Event()

    def produce() -> None:
        producer.produce(topic, value, key=key)
        done.set()

    thread = threading.Thread(target=produce)
    thread.start()
    return thread, done


@pytest.fixture
def setup(kafka: KafkaHandle) -> Iterator[Setup]:
    epochs, registry_topic = kafka.topic("epochs"), kafka.topic("producers")
    ensure_log_topics(kafka.admin, epochs, registry_topic)
    writer = EpochLogWriter(kafka.config(), epochs)
    registry = ProducerLiveness(kafka.config(), registry_topic)
    yield Setup(kafka, kafka.create_topic(3), epochs, registry_topic, writer, registry)
    registry.close()
    writer.close()


def _partitions_written(kafka: KafkaHandle, topic: str, partitions: int) -> dict[int, int]:
    return records_per_partition(kafka.bootstrap, topic, partitions)


def test_partitions_come_from_the_epoch_not_from_metadata(setup: Setup) -> None:
    setup.writer.write(EpochHistory.initial(setup.topic, 3))
    with setup.producer() as producer:
        setup.grow_broker(6)  # grown outside ordo: the epoch still says 3
        keys = [f"k{i}".encode() for i in range(200)]
        for key in keys:
            producer.produce(setup.topic, b"v", key=key)
        assert producer.flush(10) == 0
        assert producer.partitions_for(setup.topic) == 3
    written = _partitions_written(setup.kafka, setup.topic, 6)
    assert written[3] == written[4] == written[5] == 0
    expected = [sum(murmur2_partition(k, 3) == p for k in keys) for p in range(3)]
    assert [written[p] for p in range(3)] == expected


def _committed(kafka: KafkaHandle, topic: str, count: int) -> list[Any]:
    reader = Consumer(kafka.config(group_id=kafka.topic("g"), auto_offset_reset="earliest"))
    reader.subscribe([topic])
    try:
        return consume(reader, count)
    finally:
        reader.close()


def test_during_a_fence_a_staying_key_is_written_and_a_moved_key_waits_for_the_publish(setup: Setup) -> None:
    """k stays in partition 2 (3 -> 6), k0 moves from 2 to 5 (ordo.fence, issue 43)."""
    assert murmur2_partition(b"k", 3) == murmur2_partition(b"k", 6) != murmur2_partition(b"k0", 6)
    history = EpochHistory.initial(setup.topic, 3)
    setup.writer.write(history)
    with setup.producer(producer_id="fence-me") as producer:
        producer.produce(setup.topic, b"before", key=b"k0")
        fenced = setup.fence(history, "fence-me", 6)
        thread, done = _produce_in_background(producer, setup.topic, b"during", b"k")
        assert done.wait(10), "a staying key's produce() returns during the fence"
        thread.join()
        producer.produce(setup.topic, b"during", key=b"k0")  # parked: returns at once
        written = _committed(setup.kafka, setup.topic, 2)  # written and committed during the fence
        assert sorted((r.key(), r.value(), r.partition()) for r in written) == [
            (b"k", b"during", 2),
            (b"k0", b"before", 2),
        ]
        assert len(producer) == 1, "the moved key's record waits"
        setup.grow_broker(6)
        setup.writer.write(fenced.publish({0: 0, 1: 0, 2: 0}))
        assert producer.flush(10) == 0
        assert producer.partitions_for(setup.topic) == 6
        blocked = REGISTRY.get_sample_value("ordo_produce_blocked_seconds_count", {"topic": setup.topic})
        assert (blocked or 0) == len(producer.stalls), "each held produce() is in the SDK metric"
    records = _committed(setup.kafka, setup.topic, 3)
    assert sorted((r.value(), r.partition()) for r in records if r.key() == b"k0") == [
        (b"before", 2),
        (b"during", 5),
    ]


def test_steady_records_take_the_c_path_and_a_fence_keeps_it_for_staying_keys_only(setup: Setup) -> None:
    history = EpochHistory.initial(setup.topic, 3)
    setup.writer.write(history)
    keys = [f"k{i}".encode() for i in range(20)]
    with setup.producer(producer_id="fast") as producer:
        fast: Any = producer.produce
        assert hasattr(fast, "fast_calls"), (
            "ordo._fastproduce was not built (pip install -e . needs a C compiler)"
        )
        for _ in range(10):
            for key in keys:
                producer.produce(setup.topic, b"old", key=key)
        served = fast.fast_calls
        # Python serves the first record of each key (its hash is not cached) and of each partition
        # in the epoch (it carries the stamp); the C path serves the rest.
        assert served >= 10 * len(keys) - len(keys) - 3
        fenced = setup.fence(history, "fast", 6)
        staying = [k for k in keys if murmur2_partition(k, 3) == murmur2_partition(k, 6)]
        thread, done = _produce_in_background(producer, setup.topic, b"new", staying[0])
        assert done.wait(10), "a staying key goes on once the fence is acknowledged"
        thread.join()
        served = fast.fast_calls
        for key in keys:
            producer.produce(setup.topic, b"new", key=key)  # moved keys park: nothing waits
        assert fast.fast_calls - served == len(staying), "staying keys take the C path, moved ones Python"
        assert len(producer) >= len(keys) - len(staying)
        setup.grow_broker(6)
        setup.writer.write(fenced.publish({0: 0, 1: 0, 2: 0}))
        for _ in range(3):
            for key in keys[1:]:
                producer.produce(setup.topic, b"new", key=key)
        assert fast.fast_calls > served and producer.flush(10) == 0
    reader = Consumer(setup.kafka.config(group_id=setup.kafka.topic("g"), auto_offset_reset="earliest"))
    reader.subscribe([setup.topic])
    try:
        records = consume(reader, 10 * len(keys) + 1 + len(keys) + 3 * (len(keys) - 1))
    finally:
        reader.close()
    for record in records:
        count = 3 if record.value() == b"old" else 6
        written = record.key()
        assert written is not None and record.partition() == murmur2_partition(written, count), written


def test_keys_that_never_reach_a_partition_still_take_the_c_path(setup: Setup) -> None:
    """A producer whose keys cover only some partitions (few keys, many partitions): the records of
    the partitions it stamped go to the C path although the others are never stamped."""
    setup.writer.write(EpochHistory.initial(setup.topic, 3))
    keys = [k for k in (f"k{i}".encode() for i in range(100)) if murmur2_partition(k, 3) != 2][:10]
    with setup.producer(producer_id="few-keys") as producer:
        fast: Any = producer.produce
        for _ in range(10):
            for key in keys:
                producer.produce(setup.topic, b"v", key=key)
        # Python serves each key's first record (its hash is not cached) and the stamped first
        # record of partitions 0 and 1; the C path serves the rest
        assert fast.fast_calls >= 10 * len(keys) - len(keys) - 2
        assert producer.flush(10) == 0
    written = _partitions_written(setup.kafka, setup.topic, 3)
    assert written == {0: sum(murmur2_partition(k, 3) == 0 for k in keys) * 10,
                       1: sum(murmur2_partition(k, 3) == 1 for k in keys) * 10, 2: 0}  # fmt: skip


def test_the_first_record_per_partition_of_each_epoch_is_stamped(setup: Setup) -> None:
    history = EpochHistory.initial(setup.topic, 3)
    setup.writer.write(history)
    keys = [f"k{i}".encode() for i in range(60)]
    with setup.producer() as producer:
        for key in keys:
            producer.produce(setup.topic, b"epoch-0", key=key)
        assert producer.flush(10) == 0
        fenced = history.begin_fence(4)
        setup.writer.write(fenced)
        setup.grow_broker(4)
        setup.writer.write(fenced.publish(_partitions_written(setup.kafka, setup.topic, 3)))
        assert wait_for(lambda: producer.partitions_for(setup.topic) == 4, 10)
        for key in keys:
            producer.produce(setup.topic, b"epoch-1", key=key, headers={"app": b"kept"})
        assert producer.flush(10) == 0
    consumer = Consumer(setup.kafka.config(group_id=setup.kafka.topic("g"), auto_offset_reset="earliest"))
    consumer.assign([TopicPartition(setup.topic, p, 0) for p in range(4)])
    messages = consume(consumer, 2 * len(keys))
    consumer.close()
    stamps: dict[tuple[int, int], list[int]] = {}  # (partition, stamped epoch) -> offsets
    for m in messages:
        epoch = stamped_epoch(m.headers())
        if epoch is not None:
            stamps.setdefault((m.partition() or 0, epoch), []).append(m.offset() or 0)
        if m.value() == b"epoch-1":
            assert ("app", b"kept") in (m.headers() or []), "the caller's headers are kept"
    first: dict[tuple[int, bytes], int] = {}
    for m in messages:
        first.setdefault((m.partition() or 0, m.value() or b""), m.offset() or 0)
    assert stamps == {(p, int(v[-1:])): [o] for (p, v), o in first.items()}, "one stamp: the first record"


def test_blocked_longer_than_the_timeout_raises_and_sends_nothing(setup: Setup) -> None:
    history = EpochHistory.initial(setup.topic, 3)
    setup.writer.write(history.begin_fence(4))
    assert murmur2_partition(b"k", 3) != murmur2_partition(b"k", 4)  # moves: parks, one at most here
    producer = setup.producer(max_parked=1, block_timeout=2.0)
    try:
        producer.produce(setup.topic, b"x", key=b"k")
        with pytest.raises(ProduceBlockedError, match="fenced for epoch 1"):
            producer.produce(setup.topic, b"y", key=b"k")
        assert producer.flush(0.5) == 1, "the parked record waits for the fence's end"
    finally:
        producer.close(0.5)  # the fence does not end: the parked record is reported failed
    assert sum(_partitions_written(setup.kafka, setup.topic, 3).values()) == 0


def test_an_aborted_fence_resumes_at_the_old_count(setup: Setup) -> None:
    history = EpochHistory.initial(setup.topic, 3).begin_fence(6)
    setup.writer.write(history)
    with setup.producer() as producer:
        setup.writer.write(history.abort())
        producer.produce(setup.topic, b"x", key=b"k")
        assert producer.partitions_for(setup.topic) == 3


def test_close_reports_the_producer_gone(setup: Setup) -> None:
    producer = setup.producer(producer_id="leaving")
    producer.produce(setup.topic, b"x", key=b"k")
    assert setup.registry.wait_for(lambda: setup.registry.get("leaving") is not None, 10)
    producer.close()
    assert setup.registry.wait_for(lambda: setup.registry.get("leaving").closed, 10)  # type: ignore[union-attr]
    assert setup.registry.live(setup.topic) == {}
    with pytest.raises(ProducerClosedError):
        producer.produce(setup.topic, b"x")


def test_a_producer_that_cannot_report_stops_producing(setup: Setup) -> None:
    setup.kafka.require_faults()
    # the 3 s session: the first produce reports to the registry synchronously within it
    with setup.producer(session_timeout=3.0, block_timeout=0.3) as producer:
        producer.produce(setup.topic, b"x", key=b"k")
        fault = setup.kafka.faults.add(
            Fault("Produce", topic=setup.registry_topic, error="not_leader_or_follower")
        )

        def self_fenced() -> bool:
            try:
                producer.produce(setup.topic, b"x", key=b"k")
            except ProduceBlockedError as error:
                assert "lost its liveness" in str(error)
                return True
            return False

        try:
            wait_for(self_fenced, 20, "the producer to self-fence", step=0.05)
        finally:
            setup.kafka.faults.remove(fault.id)
        producer.block_timeout = 10
        producer.produce(setup.topic, b"again", key=b"k")  # reporting works again: it resumes


def test_bad_configuration_is_refused(setup: Setup) -> None:
    with pytest.raises(ConfigError, match="unknown partitioner 'sticky'"):
        setup.producer(partitioner="sticky")
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        OrderedProducer({})
    with setup.producer() as producer, pytest.raises(ConfigError, match="does not exist"):
        producer.produce("no-such-topic-" + setup.topic, b"x")


def test_a_fence_is_acknowledged_only_once_what_was_sent_before_it_is_written(setup: Setup) -> None:
    """The acknowledgement lets the operator read the thresholds: a record sent before the fence
    and still on its way (here: its Produce reaches the broker 8 s late, longer than the 3 s
    session's flush) must be written first, or it lands after the threshold under the old count.
    On Kafka this happened while the transaction coordinator was still loading: an idempotent
    producer's first records waited seconds for their producer id. (A record of a key the fence
    does not move may land after the threshold: k0 moves from partition 2 to 5.)"""
    setup.kafka.require_faults()
    assert murmur2_partition(b"k0", 3) != murmur2_partition(b"k0", 6)
    history = EpochHistory.initial(setup.topic, 3)
    delivered: list[float] = []
    with setup.producer(session_timeout=3.0) as producer:
        producer.produce(setup.topic, b"warm", key=b"k")
        assert producer.flush(10) == 0
        setup.kafka.faults.add(Fault("Produce", topic=setup.topic, delay=8.0, count=1))
        producer.produce(
            setup.topic, b"late", key=b"k0", on_delivery=lambda e, m: delivered.append(time.monotonic())
        )
        producer.poll(0)
        setup.writer.write(history.begin_fence(6))
        assert setup.registry.wait_for(
            lambda: (
                (r := setup.registry.get(producer.producer_id)) is not None and r.fenced.get(setup.topic) == 1
            ),
            30,
        ), "the producer acknowledges the fence once the record is written"
        acknowledged = time.monotonic()
        producer.poll(0)
        assert delivered and delivered[0] <= acknowledged


def test_a_producer_fenced_through_the_broker_at_a_fence_sends_again_by_the_staying_keys_rule(
    setup: Setup,
) -> None:
    """Fenced through Kafka with a transaction open when a fence (3 -> 6) arrives: its commit
    before the acknowledgement fails, it reopens, reads the epoch log and sends the aborted records
    again by the rule: staying keys' at once, moved keys' parked ahead of those produce() parks
    after it, all of those by 6 once the epoch is published. Each record once, every key in order."""
    history = EpochHistory.initial(setup.topic, 3)
    setup.writer.write(history)
    keys = [f"k{i}".encode() for i in range(7)]
    moving = {k for k in keys if murmur2_partition(k, 3) != murmur2_partition(k, 6)}
    assert moving and len(moving) < len(keys)
    with setup.producer(producer_id="renewed", commit_interval=60.0) as producer:
        for i in range(30):
            producer.produce(setup.topic, f"{i}".encode(), key=keys[i % 7])
        # written, not committed: the producer meets the fencing only at its next commit (the fence's)
        wait_for(lambda: producer.poll(0) >= 0 and len(producer.raw) == 0, 10, "the records written")
        fencer = Producer(setup.kafka.config(transactional_id=producer.transactional_id))
        fencer.init_transactions(30)  # the open transaction is aborted, the producer refused
        fenced = setup.fence(history, "renewed", 6)  # acknowledged once it sent them again
        for i in range(30, 90):
            producer.produce(setup.topic, f"{i}".encode(), key=keys[i % 7])
        setup.grow_broker(6)
        setup.writer.write(fenced.publish({0: 0, 1: 0, 2: 0}))
        assert producer.flush(30) == 0
    records = _committed_records(setup.kafka, setup.topic, 6)
    assert sorted(int(m.value()) for m in records) == list(range(90)), "each record once"
    for key in keys:
        mine = [(m.partition(), int(m.value())) for m in records if m.key() == key]
        assert {p for p, _v in mine} == {murmur2_partition(key, 6)}, f"{key!r}: {mine}"
        assert [v for _p, v in mine] == sorted(v for _p, v in mine), f"{key!r} out of order: {mine}"


def _committed_records(kafka: KafkaHandle, topic: str, partitions: int) -> list[Any]:
    """Every committed record of ``topic`` (read_committed), partition by partition in offset order."""
    counts = records_per_partition(kafka.bootstrap, topic, partitions)
    consumer = Consumer(kafka.config(group_id="committed", isolation_level="read_committed"))
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions) if counts[p]])
        messages = consume(consumer, sum(counts.values()))
        return sorted(messages, key=lambda m: (m.partition(), m.offset()))
    finally:
        consumer.close()


def test_a_producer_fenced_through_the_broker_sends_its_aborted_records_again(setup: Setup) -> None:
    """The operator fences a producer that does not acknowledge a fence with InitProducerId of its
    transactional id: the broker aborts the open transaction and refuses the old producer. The
    producer reopens and sends what was aborted again, in order: nothing lost, nothing twice."""
    setup.writer.write(EpochHistory.initial(setup.topic, 3))
    delivered: list[tuple[bytes, int]] = []

    def note(error: Any, message: Any) -> None:
        assert error is None, error
        delivered.append((message.value(), message.offset()))

    before = REGISTRY.get_sample_value("ordo_producer_fenced_total") or 0.0
    with setup.producer(commit_interval=60.0) as producer:  # one open transaction until flush()
        assert producer.transactional_id == f"ordo-producer.{producer.producer_id}"
        for i in range(60):
            producer.produce(setup.topic, f"{i}".encode(), key=f"k{i % 7}".encode(), on_delivery=note)
        assert producer.poll(5) >= 0 and not delivered, "reports are held until the commit"
        fencer = Producer(setup.kafka.config(transactional_id=producer.transactional_id))
        fencer.init_transactions(30)  # what the operator does to a silent producer
        for i in range(60, 120):
            producer.produce(setup.topic, f"{i}".encode(), key=f"k{i % 7}".encode())
        assert producer.flush(30) == 0
        assert len(producer) == 0
    records = _committed_records(setup.kafka, setup.topic, 3)
    values = [int(m.value()) for m in records]
    assert sorted(values) == list(range(120)), "each record once: the aborted ones were sent again"
    for key in {m.key() for m in records}:
        mine = [int(m.value()) for m in records if m.key() == key]
        assert mine == sorted(mine), f"{key!r} out of order: {mine}"
        assert len({m.partition() for m in records if m.key() == key}) == 1
    assert sorted(int(v) for v, _ in delivered) == list(range(60)), "one report per record, after the commit"
    committed_at = {(m.value(), m.offset()) for m in records}
    assert set(delivered) <= committed_at, "a report names where the record was committed"
    assert (REGISTRY.get_sample_value("ordo_producer_fenced_total") or 0.0) == before + 1
