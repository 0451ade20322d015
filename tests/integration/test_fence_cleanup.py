"""Fences nobody else will end are ended, and the epoch log has one writer (issue 42, item 3).

Before: deleting an expansion whose Kafka connection could not be resolved (its Secret deleted,
its namespace being deleted) dropped ordo's finalizer without aborting the fence, so the topic's
producers blocked and every later expansion waited for ever; a second writer of the epoch log (a
paused ex-active replica) wrote beside the active one; and a refused record left as a topic's
last record was what a reader found alone after compaction. Each test fails without its fix.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from ordo.epochs import EpochHistory, EpochState
from ordo.epochs.liveness import ProducerReport
from ordo.epochs.log import (
    EpochLog,
    EpochLogWriter,
    StaleHistoryError,
    read_history,
    writer_transactional_id,
)
from ordo.ordered_producer import OrderedProducer
from ordo_operator.config import OperatorConfig
from ordo_operator.kafka import KafkaSide
from ordo_operator.topics import TopicWatch
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.kube.fixtures import Kube
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.resources import Expansions
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed

POD = "ordo-operator-0"  # the operator's pod, as the chart's downward API names it


# --- the epoch log's writer --------------------------------------------------------------------


def test_the_epoch_log_writer_that_started_last_fences_the_others(
    kafka: KafkaHandle, log_topics: tuple[str, str]
) -> None:
    """Two writers with the operator's transactional id, as two replicas have them: the newer
    one's init fences the older, whose write (planned before it was paused) fails and reaches no
    reader; when the older one writes again it fences the newer in turn, reads the log after
    that, and refuses the history it had planned on its older view."""
    epochs, _ = log_topics
    topic = kafka.topic("orders")
    first = EpochHistory.initial(topic, 4)
    log = EpochLog(kafka.config(), epochs)
    old = EpochLogWriter(kafka.config(), epochs, writer_transactional_id(epochs))
    new = EpochLogWriter(kafka.config(), epochs, writer_transactional_id(epochs))
    try:
        assert old.write_checked(first, log, 30)
        planned_by_old = first.begin_fence(8)  # then it is paused; the other replica takes over
        newer = first.begin_fence(6)
        assert new.write_checked(newer, log, 30)
        with pytest.raises(KafkaException):
            old.write(planned_by_old, 15)  # fenced: never committed
        assert log.catch_up(15) and log.history(topic) == newer
        assert log.invalid_records == 0, "nothing of the fenced writer reached a read_committed reader"
        with pytest.raises(StaleHistoryError, match="rewrites epoch 1"):
            old.write_checked(planned_by_old, log, 30)  # it fenced `new`, then read the log again
        assert log.catch_up(15) and log.history(topic) == newer and log.invalid_records == 0
        aborted = newer.abort()  # the newer replica's next write: fenced once, then written
        with pytest.raises(KafkaException):
            new.write_checked(aborted, log, 30)
        assert new.write_checked(aborted, log, 30) and log.history(topic) == aborted
    finally:
        for writer in (old, new):
            writer.close()
        log.close()


def test_a_refused_record_left_last_is_answered_with_the_newest_history(
    kafka: KafkaHandle, log_topics: tuple[str, str]
) -> None:
    """A late write of an older history (an old operator's, a tool's) lands after the newest:
    readers refuse it, but compaction keeps only a key's last record, so a reader starting later
    would find it alone. The operator's topic watch writes the newest history again."""
    epochs, registry = log_topics
    topic = kafka.create_topic(4)
    settings = OperatorConfig(epoch_topic=epochs, registry_topic=registry)
    side = KafkaSide(kafka.config(), settings)
    try:
        first = EpochHistory.initial(topic, 4)
        newest = first.begin_fence(8).publish({p: 0 for p in range(4)})
        side.write_history(first)
        side.write_history(newest)
        late = Producer(kafka.config())
        late.produce(epochs, key=topic.encode(), value=first.model_dump_json().encode())
        assert late.flush(10) == 0
        assert side.epochs.catch_up(15) and topic in side.epochs.stale_tails()
        assert _last_record(kafka, epochs, topic) == first, "what compaction would keep"
        TopicWatch(settings, lambda _topic: False).check(side)
        assert _last_record(kafka, epochs, topic) == newest
        assert side.epochs.stale_tails() == {}
    finally:
        side.close()


def _last_record(kafka: KafkaHandle, epochs: str, topic: str) -> EpochHistory:
    """The last committed record of ``topic``'s key in the epoch log: what compaction keeps."""
    consumer = Consumer({**kafka.config(), "group.id": "last", "isolation.level": "read_committed",
                         "enable.partition.eof": True})  # fmt: skip
    consumer.assign([TopicPartition(epochs, 0, OFFSET_BEGINNING)])
    last: bytes | None = None
    try:
        while True:
            message = consumer.poll(10)
            assert message is not None, "the epoch log read to its end"
            if message.error() is not None:
                break  # end of partition
            if message.key() == topic.encode():
                last = message.value()
    finally:
        consumer.close()
    assert last is not None
    return EpochHistory.model_validate_json(last)


# --- fences without an expansion ---------------------------------------------------------------


def test_ordo_abort_fence_aborts_a_fence_by_hand(kafka: KafkaHandle, log_topics: tuple[str, str]) -> None:
    epochs, registry = log_topics
    topic = kafka.create_topic(4)
    writer = EpochLogWriter(kafka.config(), epochs)
    fencing = EpochHistory.initial(topic, 4).begin_fence(8)
    for history in (EpochHistory.initial(topic, 4), fencing):
        writer.write(history)
    writer.close()
    command = [sys.executable, "-m", "ordo.cli", "abort-fence", "--topic", topic, "--bootstrap",
               kafka.bootstrap, "--epoch-topic", epochs]  # fmt: skip
    wrong = subprocess.run([*command, "--epoch", "2"], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 1 and "has no epoch 2" in wrong.stderr
    done = subprocess.run([*command, "--epoch", "1"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "aborted epoch 1" in done.stdout and "resume at 4 partitions" in done.stdout
    assert read_history(kafka.config(), epochs, topic) == fencing.abort()
    again = subprocess.run([*command, "--epoch", "1"], capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "aborted already" in again.stdout
    with OrderedProducer(
        kafka.config(), epoch_topic=epochs, registry_topic=registry, block_timeout=5
    ) as free:
        free.produce(topic, b"x", key=b"k")  # not fenced: ProduceBlockedError after 5 s otherwise
        assert free.partitions_for(topic) == 4


def test_the_operator_aborts_an_orphan_fence_and_never_one_in_flight(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
) -> None:
    """A fencing epoch no expansion drives (its delete could not reach Kafka, or an operator died
    between recording Aborted and writing it) is aborted after ORDO_ORPHAN_FENCE_SECONDS, said on
    the operator's pod; the fence of an expansion in flight, held longer than that, is not."""
    epochs, registry = log_topics
    orphan, held = kafka.create_topic(4), kafka.create_topic(4)
    stubborn = _Stubborn(kafka, registry, held)
    operator_process(ORDO_ORPHAN_FENCE_SECONDS="1", ORDO_TOPIC_CHECK_SECONDS="0.5", POD_NAME=POD,
                     POD_NAMESPACE=kube.namespace).start()  # fmt: skip
    grow = Expansions(kube.custom, kube.namespace)
    try:
        grow.create("held", held, 8, fenceTimeoutSeconds=120)
        grow.wait_phase("held", "Fencing", 60)
        writer = EpochLogWriter(kafka.config(), epochs)
        for history in (EpochHistory.initial(orphan, 4), EpochHistory.initial(orphan, 4).begin_fence(8)):
            writer.write(history)
        writer.close()
        wait_for(
            lambda: _states(kafka, epochs, orphan)[-1] == (1, EpochState.ABORTED), 60, "the orphan aborted"
        )
        said = wait_for(lambda: kube.events("OrphanFenceAborted"), 30, "the Event on the operator's pod")
        assert said[0].involved_object.name == POD and f"epoch 1 of {orphan!r}" in (said[0].message or "")
        # the sweeps that found the orphan, after its grace, found the held fence as long
        assert grow.status("held")["phase"] == "Fencing"
        assert _states(kafka, epochs, held)[-1] == (1, EpochState.FENCING), "in flight: not an orphan"
    finally:
        stubborn.close()


# --- deleting an expansion whose connection cannot be resolved -----------------------------------


def test_a_secret_deleted_before_its_fencing_expansion_is_deleted(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
) -> None:
    """The expansion's connection reads a Secret, which is deleted while it fences; then the
    expansion is deleted. The operator undoes it with the clients that drove it. Once more with
    the operator restarted in between (it holds no clients for that connection then): the
    finalizer stays and an UndoBlocked Warning says what to restore, while the epoch stays
    fencing (the orphan sweep leaves a fence whose expansion is being deleted alone); once the
    Secret is back the fence is aborted and the resource goes. Producers are free, and a new
    expansion completes."""
    epochs, registry = log_topics
    topic = kafka.create_topic(4)
    secret = {"metadata": {"name": "kafka-options"}, "stringData": {"client.id": "ordo-fence-test"}}
    # the default cluster under another name, so the operator's own default clients are not the
    # expansion's (those would serve the undo of an expansion of the default cluster)
    spec_kafka = {"bootstrapServers": kafka.bootstrap.replace("127.0.0.1", "localhost"),
                  "secretRef": {"name": "kafka-options"}}  # fmt: skip
    stubborn = _Stubborn(kafka, registry, topic)
    operator = operator_process(ORDO_ORPHAN_FENCE_SECONDS="1", ORDO_TOPIC_CHECK_SECONDS="0.5").start()
    grow = Expansions(kube.custom, kube.namespace)
    try:
        for held in (True, False):
            kube.core.create_namespaced_secret(kube.namespace, secret)
            stubborn.report()
            name = "held" if held else "restarted"
            grow.create(name, topic, 8, fenceTimeoutSeconds=120, kafka=spec_kafka)
            epoch = grow.wait_phase(name, "Fencing", 60)["epoch"]
            wait_for(_last_is(kafka, epochs, topic, (epoch, EpochState.FENCING)), 30, "fencing")
            kube.core.delete_namespaced_secret("kafka-options", kube.namespace)
            if not held:
                operator.kill()  # kill -9: the clients that drove it are gone with it
            grow.delete(name)
            if not held:
                operator.start()
                blocked = wait_for(lambda: kube.events("UndoBlocked"), 60, "an UndoBlocked Warning")
                words = blocked[0].message or ""
                assert "Secret 'kafka-options' not found" in words and "ordo abort-fence" in words
                # three tries later (2 + 4 s), the topic watch's sweeps (grace 1 s) ran meanwhile
                wait_for(lambda: "next try in 8 s" in operator.log_text(), 60, "the third try")
                assert grow.exists(name), "the finalizer stays until the fence is undone"
                assert _states(kafka, epochs, topic)[-1] == (epoch, EpochState.FENCING)
                kube.core.create_namespaced_secret(kube.namespace, secret)  # restored
            wait_for(_gone(grow, name), 90, f"{name} undone and gone")
            assert _states(kafka, epochs, topic)[-1] == (epoch, EpochState.ABORTED)
            if not held:
                kube.core.delete_namespaced_secret("kafka-options", kube.namespace)
        stubborn.close()
        with OrderedProducer(
            kafka.config(), epoch_topic=epochs, registry_topic=registry, block_timeout=5
        ) as free:
            free.produce(topic, b"x", key=b"k")
            assert free.partitions_for(topic) == 4
        grow.create("again", topic, 8, fenceTimeoutSeconds=60)
        status = grow.wait_phase("again", "Completed", 90)
        assert (status["fromPartitions"], status["toPartitions"]) == (4, 8)
    finally:
        stubborn.close()


def test_an_operator_restarted_without_the_connection_keeps_the_fencing_expansion_and_goes_on(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    operator_process: Callable[..., OperatorProcess],
) -> None:
    """The operator is killed while an expansion fences, and the expansion's Secret is deleted
    meanwhile: the restarted operator cannot resolve the connection and holds no clients for it.
    It keeps the expansion Fencing (it marked it Failed before, leaving its fence for the orphan
    sweep alone to find), says so in a ConnectionUnresolved Warning, and retries; once the Secret
    is back the expansion goes on and completes."""
    epochs, registry = log_topics
    topic = kafka.create_topic(4)
    secret = {"metadata": {"name": "kafka-restart"}, "stringData": {"client.id": "ordo-restart-test"}}
    spec_kafka = {"bootstrapServers": kafka.bootstrap.replace("127.0.0.1", "localhost"),
                  "secretRef": {"name": "kafka-restart"}}  # fmt: skip
    stubborn = _Stubborn(kafka, registry, topic)
    operator = operator_process(ORDO_ORPHAN_FENCE_SECONDS="0").start()
    grow = Expansions(kube.custom, kube.namespace)
    try:
        kube.core.create_namespaced_secret(kube.namespace, secret)
        grow.create("restarted", topic, 8, fenceTimeoutSeconds=300, kafka=spec_kafka)
        epoch = grow.wait_phase("restarted", "Fencing", 60)["epoch"]
        wait_for(_last_is(kafka, epochs, topic, (epoch, EpochState.FENCING)), 30, "the fence in the log")
        operator.kill()
        kube.core.delete_namespaced_secret("kafka-restart", kube.namespace)
        operator.start()
        said = wait_for(lambda: kube.events("ConnectionUnresolved"), 60, "a ConnectionUnresolved Warning")
        assert "kafka-restart" in (said[0].message or "") and "stays fencing" in (said[0].message or "")
        assert grow.status("restarted")["phase"] == "Fencing", "not Failed with its fence left behind"
        assert _states(kafka, epochs, topic)[-1] == (epoch, EpochState.FENCING)
        kube.core.create_namespaced_secret(kube.namespace, secret)
        stubborn.close()  # the fence it held can complete now
        status = grow.wait_phase("restarted", "Completed", 90)
        assert (status["fromPartitions"], status["toPartitions"]) == (4, 8)
    finally:
        stubborn.close()


@pytest.fixture
def doomed(kube: Kube) -> Iterator[str]:
    """A namespace of this test's own, to delete (the operator is served from elsewhere)."""
    name = f"{kube.namespace}-doomed"
    kube.core.create_namespace({"metadata": {"name": name, "labels": {"ordo.dev/test": "true"}}})
    yield name
    try:
        kube.core.delete_namespace(name)
    except Exception as error:
        if getattr(error, "status", None) != 404:
            raise


def test_a_namespace_deleted_with_an_expansion_fencing_goes_and_the_fence_is_aborted(
    kafka: KafkaHandle,
    kube: Kube,
    log_topics: tuple[str, str],
    doomed: str,
    tmp_path: Path,
) -> None:
    """The namespace controller deletes the expansion's Secret and the expansion together: the
    operator aborts the fence with the clients that drove it and releases the expansion, so the
    namespace goes (it stayed Terminating, or went leaving the fence, before). The operator runs
    with a cluster-wide identity: a Role in the namespace being deleted goes with it."""
    epochs, registry = log_topics
    topic = kafka.create_topic(4)
    stubborn = _Stubborn(kafka, registry, topic)
    env = {"ORDO_EPOCH_TOPIC": epochs, "ORDO_REGISTRY_TOPIC": registry}
    operator = OperatorProcess(kube.kubeconfig_path, kafka.bootstrap, namespaces=[kube.namespace, doomed],
                               env=env, log_path=tmp_path / "operator.log").start()  # fmt: skip
    try:
        kube.core.create_namespaced_secret(
            doomed, {"metadata": {"name": "kafka-options"}, "stringData": {"client.id": "ordo-ns-test"}}
        )
        spec_kafka = {"bootstrapServers": kafka.bootstrap, "secretRef": {"name": "kafka-options"}}
        grow = Expansions(kube.custom, doomed)
        grow.create("grow", topic, 8, fenceTimeoutSeconds=120, kafka=spec_kafka)
        epoch = grow.wait_phase("grow", "Fencing", 60)["epoch"]
        wait_for(lambda: _states(kafka, epochs, topic)[-1] == (epoch, EpochState.FENCING), 30, "fencing")
        kube.core.delete_namespace(doomed)
        wait_for(lambda: not _namespace_exists(kube, doomed), 120, "the namespace to go")
        assert _states(kafka, epochs, topic)[-1] == (epoch, EpochState.ABORTED)
        stubborn.close()
        with OrderedProducer(
            kafka.config(), epoch_topic=epochs, registry_topic=registry, block_timeout=5
        ) as free:
            free.produce(topic, b"x", key=b"k")
            assert free.partitions_for(topic) == 4
        again = Expansions(kube.custom, kube.namespace)
        again.create("again", topic, 8, fenceTimeoutSeconds=60)
        status = again.wait_phase("again", "Completed", 90)
        assert (status["fromPartitions"], status["toPartitions"]) == (4, 8)
    finally:
        stubborn.close()
        operator.stop()


def _namespace_exists(kube: Kube, name: str) -> bool:
    try:
        kube.core.read_namespace(name)
    except Exception as error:
        if getattr(error, "status", None) == 404:
            return False
        raise
    return True


# --- helpers ------------------------------------------------------------------------------------


class _Stubborn:
    """A producer of ``topic`` that reports live and never acknowledges a fence (nor can be fenced
    through the broker: it reports no transactional id), so a fence waits for it."""

    def __init__(self, kafka: KafkaHandle, registry: str, topic: str) -> None:
        self.registry, self.topic = registry, topic
        self.producer: Producer | None = Producer(kafka.config())
        self.report()

    def report(self, closed: bool = False) -> None:
        if self.producer is None:
            return
        report = ProducerReport(producer_id=f"stubborn-{self.topic}", topics=(self.topic,),
                                session_timeout_ms=120_000, reported_at_ms=int(time.time() * 1000),
                                closed=closed)  # fmt: skip
        self.producer.produce(
            self.registry, key=report.producer_id.encode(), value=report.model_dump_json().encode()
        )
        assert self.producer.flush(10) == 0

    def close(self) -> None:
        """It closes cleanly: fences no longer wait for it."""
        self.report(closed=True)
        self.producer = None


def _last_is(kafka: KafkaHandle, epochs: str, topic: str, last: tuple[int, Any]) -> Callable[[], bool]:
    return lambda: _states(kafka, epochs, topic)[-1:] == [last]


def _gone(grow: Expansions, name: str) -> Callable[[], bool]:
    return lambda: not grow.exists(name)


def _states(kafka: KafkaHandle, epochs: str, topic: str) -> list[tuple[int, Any]]:
    try:
        history = read_history(kafka.config(), epochs, topic, timeout=10)
    except LookupError:
        return []
    return [(e.epoch, e.state) for e in history.epochs]
