"""Partitions added outside ordo to a topic ordo never expanded.

Before: a topic without a history in the epoch log had none until its first expansion, so each
OrderedProducer used the partition count it read first, and one started after the topic grew
outside ordo placed keys by the larger count than the others (the same key in two partitions);
nothing said so. Now the operator records epoch 0 of every topic ordo's producers write, with the
count they use: a later producer uses it too, a GatedConsumer holds the partitions no epoch
covers, a Warning Event says which expansion takes them in, and that expansion (4 -> 6, the
partitions already there) opens them after their prior partitions, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer

from ordo import GatedConsumer
from ordo.epochs.log import read_history
from ordo.verify import KeyOrder
from ordo_sandbox.scenario.records import Numbered, decode, encode
from ordo_sandbox.scenario.verify import read_acknowledged
from ordo_sandbox.scenario.workload import Workload
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kafka.testing import await_records, records_per_partition
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions
from ordo_testbed.waiting import wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

POD = "ordo-operator-0"  # the operator's pod, as the chart's downward API names it


def test_partitions_added_outside_ordo_are_held_said_and_taken_in_by_an_expansion(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
    tmp_path: Path,
) -> None:
    epochs, registry = log_topics
    topic = kafka.create_topic(4)
    operator_process(ORDO_TOPIC_CHECK_SECONDS="0.5", POD_NAME=POD, POD_NAMESPACE=kube.namespace).start()

    def one_producer(name: str, first_id: int) -> Workload:
        return Workload(
            kafka.bootstrap, topic, tmp_path / name, producers=1, consumers=0, keys=100, rate=200,
            epoch_topic=epochs, registry_topic=registry, first_id=first_id,
        )  # fmt: skip

    early, late = one_producer("early", 0).start_producers(), one_producer("late", 1)
    consumer: GatedConsumer | None = None
    delivered = KeyOrder()
    seen_partitions: set[int] = set()

    def consume() -> int:
        """Hand out what the gate admits now; how many records were delivered so far."""
        assert consumer is not None
        for message in consumer.consume(500, 0.2):
            assert message.error() is None, message.error()
            record = decode(message.value() or b"")
            delivered.add(record.key, record.seq, f"p{message.partition()}@{message.offset()}")
            seen_partitions.add(message.partition() or 0)
        return delivered.distinct

    try:
        wait_for(
            lambda: _history_partitions(kafka, epochs, topic) == 4, 30, "epoch 0 recorded by the operator"
        )
        kafka.grow(topic, 6)  # outside ordo
        late.start_producers()
        await_records(kafka.bootstrap, topic, 6, 400, timeout=30)  # both producers write
        late.stop_producers()
        placed = {int(at.split("@")[0][1:]) for at in read_acknowledged(late.delivered_paths()).values()}
        assert placed and max(placed) < 4, f"the late producer used the recorded 4 partitions: {placed}"

        outside = Producer(kafka.config())  # another team's producer writes the new partitions
        for seq in range(10):
            for partition in (4, 5):  # one key per partition: it has an order of its own to keep
                key = f"x-k{partition}"
                outside.produce(topic, encode(Numbered(key, seq)), key=key.encode(), partition=partition)
        assert outside.flush(10) == 0

        # a consumer that starts now is assigned all 6 (one running since before learns of the new
        # partitions at its next metadata refresh, or when an epoch adds them)
        consumer = GatedConsumer(
            kafka.config(group_id=kafka.topic("readers"), auto_offset_reset="earliest"),
            [topic],
            epoch_topic=epochs,
        )

        def held() -> bool:
            assert consumer is not None
            consume()
            gates = consumer.closed_gates()
            return all((topic, p) in gates and gates[(topic, p)].unknown_epoch for p in (4, 5))

        wait_for(held, 30, "the gated consumer to hold partitions 4 and 5")
        assert seen_partitions <= {0, 1, 2, 3}
        said = wait_for(lambda: kube.events("PartitionsAddedOutsideOrdo"), 30, "a Warning Event")
        assert said[0].involved_object.name == POD and said[0].type == "Warning"
        assert f"an OrderedTopicExpansion of {topic!r} to 6 or more partitions" in (said[0].message or "")

        grow = Expansions(kube.custom, kube.namespace)
        grow.create("adopt", topic, 6, fenceTimeoutSeconds=60)
        status = grow.wait_phase("adopt", "Completed", 90)
        assert (status["fromPartitions"], status["toPartitions"]) == (4, 6), "prior sets of 4 -> 6"
        early.stop_producers()
        total = sum(records_per_partition(kafka.bootstrap, topic, 6).values())  # markers are no records
        wait_for(lambda: consume() >= total, 60, "every record delivered, partitions 4 and 5 in order")
        assert {4, 5} <= seen_partitions
    finally:
        if consumer is not None:
            consumer.close()
        early.stop_producers()
    assert delivered.order_violations == 0 and delivered.duplicates == 0, delivered.examples


def _history_partitions(kafka: KafkaHandle, epochs: str, topic: str) -> int | None:
    try:
        return read_history(kafka.config(), epochs, topic, timeout=5).active.partitions
    except LookupError:
        return None
