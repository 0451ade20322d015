"""At-least-once ProducerGroup members fence themselves (issue 35, item 5).

No Kafka transaction fences an at-least-once member: one stopped (SIGSTOP) past its session, whose
partitions moved, wakes up with its copy loop where it was. Checked on what reached Kafka, read
raw: the checkpoint topic's records in order (the restart point a reader holds never goes back;
the woken member's late records are of an older generation, so readers refuse them) and the data
topic (no record of the woken member's old ownership was made after it woke, beyond the bound of
docs/reliability.md), while the new owner goes on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from ordo.group.checkpoints import CheckpointLog
from ordo.member_wire import checkpoint_key
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.pods import Pod, PodSet
from ordo_testbed.resources import Groups, group_member_argv
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed
GROUP, SESSION = "copy", 4
ZOMBIE, STEADY = "m-1", "m-0"


@dataclass(frozen=True)
class Written:
    """One record as it reached Kafka."""

    partition: int
    offset: int
    key: str
    value: dict[str, Any]
    created_ms: int


def read_raw(bootstrap: str, topic: str) -> list[Written]:
    """Every record of ``topic`` up to the high watermarks read now, in offset order per partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "zombie-verifier",
            "enable.auto.commit": False,
            "enable.partition.eof": True,  # a partition may end with a transaction marker, no record
        }
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions
        }
        wanted = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in wanted])
        out: list[Written] = []
        deadline = time.monotonic() + 60
        while wanted:
            assert time.monotonic() < deadline, f"{topic} not read to {ends} in 60 s"
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                wanted.discard(message.partition() or 0)
                continue
            assert error is None, error
            p, offset = message.partition() or 0, message.offset() or 0
            out.append(
                Written(
                    p,
                    offset,
                    (message.key() or b"").decode(),
                    json.loads(message.value() or b"{}"),
                    message.timestamp()[1],
                )
            )
            if offset + 1 >= ends[p]:
                wanted.discard(p)
        return sorted(out, key=lambda w: (w.partition, w.offset))
    finally:
        consumer.close()


@dataclass
class Fold:
    """The restart points a reader holds, record by record, by the documented rule (a record of an
    older generation than the one held is refused; a takeover keeps the restart point)."""

    points: list[int]
    refused: list[dict[str, Any]]
    held: dict[str, Any] | None


def fold(records: list[dict[str, Any]]) -> Fold:
    held: dict[str, Any] | None = None
    points: list[int] = []
    refused: list[dict[str, Any]] = []
    for record in records:
        if held is not None and record["generation"] < held["generation"]:
            refused.append(record)
            continue
        held = {**record, "checkpoint": held["checkpoint"]} if record.get("takeover") and held else record
        if held["checkpoint"] is not None:
            points.append(int(held["checkpoint"]))
    return Fold(points, refused, held)


def test_a_member_woken_after_its_partitions_moved_moves_no_checkpoint_back_and_writes_no_unit(
    kafka: KafkaHandle,
    kube: Kube,
    pods: PodSet,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
) -> None:
    operator = operator_process().start()
    topic, checkpoints = kafka.create_topic(4, prefix="data"), kafka.topic("checkpoints")
    groups = Groups(kube.custom, kube.namespace)
    groups.create(
        GROUP,
        4,
        {"app": GROUP},
        sessionTimeoutSeconds=SESSION,
        exactlyOnce=False,
        checkpointTopic=checkpoints,
    )
    argv = group_member_argv(
        kafka.bootstrap, topic, records=100_000, batch=10, rate=10, epoch_topic=log_topics[0],
        registry_topic=log_topics[1],
    )  # fmt: skip
    start: Callable[[str], Pod] = lambda name: pods.start(  # noqa: E731
        name, argv, labels={"app": GROUP}, env={"ORDO_GROUP": GROUP}, grace=10
    )
    steady, zombie = start(STEADY), start(ZOMBIE)
    try:
        groups.wait_settled(GROUP, 2, 90, 4)
        taken = groups.owners(GROUP)[ZOMBIE]
        assert taken

        def progress() -> dict[int, int]:
            return {p: int(c or 0) for p, c in groups.checkpoints(GROUP).items()}

        wait_for(lambda: all(progress()[p] >= 30 for p in taken), 60, "the zombie to copy its partitions")
        told = zombie.events("rebalance")
        old_generation = told[-1]["generation"]  # its units carry this one or older
        zombie.pause()
        wait_for(lambda: groups.owners(GROUP).get(STEADY) == [0, 1, 2, 3], 30, f"{STEADY} to take everything")
        moved = progress()
        wait_for(lambda: all(progress()[p] >= moved[p] + 30 for p in taken), 60, "the new owner to go on")
        resumed_ms = int(time.time() * 1000)
        zombie.resume()
        wait_for(
            lambda: any(
                set(taken) <= {*e["lost"], *e["revoked"]} for e in zombie.events("rebalance")[len(told) :]
            ),
            30,
            "the zombie to hear its partitions are gone",
        )
        woke = progress()
        # the zombie holds its Lease again and is given partitions in a newer generation; the new
        # owner went on meanwhile: whatever the zombie had queued has landed by then
        groups.wait_settled(GROUP, 2, 60, 4)
        wait_for(lambda: all(progress()[p] >= woke[p] + 30 for p in range(4)), 60, "progress after the wake")
        for member in (steady, zombie):  # what is in Kafka is final from here on
            member.sigterm()
        assert (steady.wait(30), zombie.wait(30)) == (0, 0)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{pods.last_words()}\n{operator.log_text()[-3000:]}") from None

    data = [w.value | {"created_ms": w.created_ms} for w in read_raw(kafka.bootstrap, topic)]
    checkpoint_records = read_raw(kafka.bootstrap, checkpoints)
    by_partition = {
        p: [w.value for w in checkpoint_records if w.key == checkpoint_key(kube.namespace, GROUP, p)]
        for p in range(4)
    }

    # the woken member made no record of its old ownership, but for the one produce() call under
    # way when it was stopped (docs/reliability.md)
    after_wake = [
        r for r in data
        if r["member"] == ZOMBIE and r["created_ms"] >= resumed_ms and r["generation"] <= old_generation
    ]  # fmt: skip
    print(f"zombie records of generation <= {old_generation} made after the wake: {after_wake}")
    assert len(after_wake) <= 1, f"the woken member produced under its old ownership: {after_wake[:12]}"

    # nor more than the one checkpoint it may have been sending when stopped, after the new owner's
    # first; readers refuse it, and the restart point they hold never goes back
    for p in taken:
        records = by_partition[p]
        first = next(
            i for i, r in enumerate(records) if r["member"] == STEADY and r["generation"] > old_generation
        )
        late = [r for r in records[first:] if r["member"] == ZOMBIE and r["generation"] <= old_generation]
        assert len(late) <= 1, f"partition {p}: the woken member wrote checkpoints after it lost it: {late}"
        seen = fold(records)
        history = ", ".join(
            f"{r['member']}/{r['generation']}/{r['checkpoint']}{'*' * bool(r.get('takeover'))}"
            for r in records
        )
        assert seen.points == sorted(seen.points), f"partition {p}: the restart point went back: {history}"
        assert all(r in seen.refused for r in late), f"partition {p}: a late record was taken: {history}"
        assert records[first].get("takeover"), f"partition {p}: the new owner's first record is its claim"
        print(
            f"partition {p}: {len(seen.points)} restart points, never back; {len(late)} late from the zombie"
        )
    # (a revoked member whose unit outlasted the revocation's wait is refused the same way: counted too)
    refused = {p: fold(by_partition[p]).refused for p in range(4)}
    print(f"records refused as stale: {refused}")
    log = CheckpointLog({"bootstrap.servers": kafka.bootstrap}, checkpoints)
    try:
        assert log.catch_up(30)
        for p in range(4):
            held, expected = log.of(kube.namespace, GROUP, p), fold(by_partition[p]).held
            assert held is not None and expected is not None and held.checkpoint == expected["checkpoint"], p
        assert log.stale_records == sum(map(len, refused.values())), "the SDK's reader refused those, counted"
    finally:
        log.close()

    # at least once: nothing below a checkpoint is missing; the new owner went on after the wake
    for p in taken:
        final = fold(by_partition[p]).held
        assert final is not None and final["generation"] > old_generation, "held under the newer ownership"
        present = {r["seq"] for r in data if r["p"] == p}
        lost = [s for s in range(int(final["checkpoint"])) if s not in present]
        assert not lost, f"partition {p}: records below its checkpoint missing: {lost[:10]}"
    assert any(r["member"] == STEADY and r["created_ms"] >= resumed_ms for r in data), "the new owner went on"
