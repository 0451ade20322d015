"""AsyncConsumer (KIP-983) against the testbed broker: commits, ordering modes, back-pressure,
cooperative rebalances with delayed revocation, lost partitions, asyncio."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition

from ordo.async_consumer import TP, AsyncConsumer, Batch, Listener
from ordo.errors import ConfigError, ConsumerClosedError
from ordo.kafka_group_protocol import CLASSIC, with_classic_defaults
from ordo_testbed.kafka.faults import Fault
from ordo_testbed.kafka.fixtures import KafkaHandle
from ordo_testbed.waiting import wait_for

pytestmark = pytest.mark.testbed
PARTITIONS = 4
PER_PARTITION = 500


@pytest.fixture
def filled(kafka: KafkaHandle) -> str:
    """A topic of PARTITIONS partitions with PER_PARTITION records each; keys k0..k9 per partition,
    values "<partition>:<seq of the key>"."""
    topic = kafka.create_topic(PARTITIONS)
    producer = Producer(kafka.config(linger_ms=5))
    for p in range(PARTITIONS):
        seqs: Counter[str] = Counter()
        for i in range(PER_PARTITION):
            key = f"k{i % 10}"
            producer.produce(topic, f"{p}:{seqs[key]}".encode(), key.encode(), partition=p)
            seqs[key] += 1
    assert producer.flush(30) == 0
    return topic


def _config(kafka: KafkaHandle, group: str, protocol: str = CLASSIC) -> dict[str, object]:
    """A member of ``group`` joining with ``protocol`` (KIP-848's session is the broker's)."""
    return with_classic_defaults(
        kafka.config(group_id=group, group_protocol=protocol, auto_offset_reset="earliest"),
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
    )


def _committed(kafka: KafkaHandle, group: str, topic: str) -> list[int]:
    reader = Consumer(kafka.config(group_id=group))
    try:
        return [
            tp.offset for tp in reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
        ]
    finally:
        reader.close()


def _where(record: Message) -> tuple[TP, int]:
    return (record.topic() or "", record.partition() or 0), record.offset() or 0


def _poll_until(
    consumer: AsyncConsumer, what: str, until: Callable[[Batch], object], timeout: float = 20
) -> list[Batch]:
    """Poll, handing each batch to ``until``, until it returns something true."""
    batches: list[Batch] = []

    def step() -> bool:
        batch = consumer.poll(0.05)
        batches.append(batch)
        return bool(until(batch))

    wait_for(step, timeout, what, step=0)
    return batches


def _collect(into: list[Message], count: int) -> Callable[[Batch], bool]:
    """An ``until`` for _poll_until: keeps the records (not done) until there are ``count``."""

    def until(batch: Batch) -> bool:
        into.extend(batch.records)
        return len(into) >= count

    return until


@contextmanager
def _running(consumer: AsyncConsumer, processed: list[tuple[TP, int]]) -> Iterator[None]:
    """``consumer`` polls on a thread of its own, processing each record at once, into ``processed``
    (list.append is atomic)."""
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            batch = consumer.poll(0.05)
            for record in batch.records:
                processed.append(_where(record))
                consumer.done(record)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def test_every_record_once_and_the_processed_positions_committed(
    kafka: KafkaHandle, filled: str, closing: list[AsyncConsumer], group_protocol: str
) -> None:
    group = kafka.topic("g")
    consumer = AsyncConsumer(_config(kafka, group, group_protocol), [filled], ordering="unordered")
    closing.append(consumer)
    seen: Counter[tuple[TP, int]] = Counter()

    def take(batch: Batch) -> bool:
        for record in batch.records:
            seen[_where(record)] += 1
            consumer.done(record)
        return len(seen) == PARTITIONS * PER_PARTITION

    _poll_until(consumer, "every record", take)
    consumer.close()
    assert set(seen.values()) == {1}
    assert _committed(kafka, group, filled) == [PER_PARTITION] * PARTITIONS


@pytest.mark.parametrize(("ordering", "many"), [("unordered", False), ("key", False), ("unordered", True)])
def test_done_from_worker_threads_always_wakes_a_waiting_poll(
    kafka: KafkaHandle, filled: str, closing: list[AsyncConsumer], ordering: str, many: bool
) -> None:
    """done() (and done_many()) only queues the records; a poll waiting for room must still be
    woken every time.
    Everything is buffered first, so a poll that runs to its deadline is a lost wake-up (the
    deadline is far beyond any scheduling delay: this checks liveness, not speed)."""
    group = kafka.topic("g")
    consumer = AsyncConsumer(_config(kafka, group), [filled], ordering=ordering, max_in_flight=8)  # type: ignore[arg-type]
    closing.append(consumer)
    total = PARTITIONS * PER_PARTITION
    wait_for(lambda: consumer.buffered >= total, 20, "every record to be fetched")
    handed: Counter[tuple[TP, int]] = Counter()
    with ThreadPoolExecutor(4) as workers:
        while len(handed) < total:
            began = time.monotonic()
            batch = consumer.poll(30)
            assert time.monotonic() - began < 29, f"a poll waited out 30 s with {consumer.buffered} buffered"
            for record in batch.records:
                handed[_where(record)] += 1
                if not many:
                    workers.submit(consumer.done, record)
            if many:
                workers.submit(consumer.done_many, batch.records)
    wait_for(lambda: consumer.in_flight == 0, 20, "every done() to be counted")
    consumer.close()
    assert set(handed.values()) == {1}
    assert _committed(kafka, group, filled) == [PER_PARTITION] * PARTITIONS


def test_done_many_in_chunks_out_of_order_commits_only_past_records_done(
    kafka: KafkaHandle, filled: str, closing: list[AsyncConsumer]
) -> None:
    """Chunks done from worker threads in shuffled order, one chunk of partition 0 held back: the
    committed position of partition 0 stops at the held chunk, the others' reach the end; records
    done twice count once."""
    group = kafka.topic("g")
    consumer = AsyncConsumer(_config(kafka, group), [filled], ordering="unordered", commit_interval=0.1)
    closing.append(consumer)
    total = PARTITIONS * PER_PARTITION
    handed: list[Message] = []
    _poll_until(consumer, "every record", _collect(handed, total))
    held = [r for r in handed if _where(r)[0][1] == 0 and 100 <= _where(r)[1] < 200]
    rest = [r for r in handed if not (_where(r)[0][1] == 0 and 100 <= _where(r)[1] < 200)]
    chunks = [rest[i : i + 64] for i in range(0, len(rest), 64)]
    random.Random(7).shuffle(chunks)
    with ThreadPoolExecutor(4) as workers:
        for chunk in chunks:
            workers.submit(consumer.done_many, chunk)
    wait_for(lambda: consumer.in_flight == len(held) == 100, 20, "every chunk but the held one done")
    expected = [100] + [PER_PARTITION] * (PARTITIONS - 1)
    wait_for(lambda: _committed(kafka, group, filled) == expected, 20, "the commit of what is done")
    consumer.done_many(held + held[:10])
    assert consumer.in_flight == 0
    consumer.close()
    assert _committed(kafka, group, filled) == [PER_PARTITION] * PARTITIONS


@pytest.mark.parametrize("ordering", ["key", "partition"])
def test_ordered_modes_never_run_two_records_of_a_lane_at_once(
    kafka: KafkaHandle, filled: str, closing: list[AsyncConsumer], ordering: str
) -> None:
    consumer = AsyncConsumer(_config(kafka, kafka.topic("g")), [filled], ordering=ordering)  # type: ignore[arg-type]
    closing.append(consumer)
    lane = (lambda r: (r.partition(), r.key())) if ordering == "key" else (lambda r: r.partition())
    running: dict[object, Message] = {}
    last: dict[tuple[int | None, bytes | None], int] = {}
    processed = 0
    keys_in_parallel = 0

    def take(batch: Batch) -> bool:
        nonlocal processed, keys_in_parallel
        for record in batch.records:
            assert lane(record) not in running, f"two records of lane {lane(record)} handed out at once"
            running[lane(record)] = record
        keys_in_parallel = max(keys_in_parallel, len(running))
        # finish them in reverse order of hand-out: order must come from the consumer, not from us
        for record in reversed(list(running.values())):
            seq = int((record.value() or b"").split(b":")[1])
            assert seq > last.get((record.partition(), record.key()), -1)
            last[(record.partition(), record.key())] = seq
            consumer.done(record)
            processed += 1
        running.clear()
        return processed == PARTITIONS * PER_PARTITION

    # every lane has records waiting before the first poll (else how many run at once depends on
    # how far the fetcher got: 20 of 40 keys on a loaded machine)
    wait_for(lambda: consumer.buffered >= PARTITIONS * PER_PARTITION, 20, "every record to be fetched")
    _poll_until(consumer, "every record", take)
    assert keys_in_parallel == (PARTITIONS * 10 if ordering == "key" else PARTITIONS)


def test_back_pressure_bounds_work_and_buffer_without_dropping(
    kafka: KafkaHandle, filled: str, closing: list[AsyncConsumer]
) -> None:
    consumer = AsyncConsumer(
        _config(kafka, kafka.topic("g")), [filled], ordering="unordered", max_in_flight=50, max_buffered=200
    )
    closing.append(consumer)
    held: list[Message] = []
    _poll_until(consumer, "max_in_flight records", _collect(held, 50))
    wait_for(lambda: consumer.buffered >= 150, 20, "the buffer to fill")
    for _ in range(10):  # nothing more is handed out while the work is not done
        assert consumer.poll(0.02).records == []
        assert consumer.buffered <= 200 + PARTITIONS
    assert consumer.in_flight == 50
    seen = {_where(r) for r in held}
    for record in held:
        consumer.done(record)

    def take(batch: Batch) -> bool:
        for record in batch.records:
            seen.add(_where(record))
            consumer.done(record)
        assert consumer.buffered <= 200 + PARTITIONS
        return len(seen) == PARTITIONS * PER_PARTITION

    _poll_until(consumer, "every record after the back-pressure", take)


def test_a_resume_wakes_the_partitions_leader_and_loses_nothing(
    kafka: KafkaHandle, filled: str, closing: list[AsyncConsumer]
) -> None:
    """librdkafka's thread for a broker whose partitions are all paused sleeps up to a second and
    sees a resume only when it wakes (0.85 s without records, measured): the fetcher asks the
    resumed partitions' leaders for their end offsets, which wakes it."""
    consumer = AsyncConsumer(
        _config(kafka, kafka.topic("g")), [filled], ordering="unordered", max_in_flight=50, max_buffered=200
    )
    closing.append(consumer)
    seen: set[tuple[TP, int]] = set()

    def take(batch: Batch) -> bool:
        for record in batch.records:
            seen.add(_where(record))
            consumer.done(record)
        return {tp for tp, _ in seen} == {(filled, p) for p in range(PARTITIONS)}

    # every partition has its fetch position (an offset reset asks the leader too): from here on
    # a ListOffsets request for the topic is a wake-up (a zero delay only counts them)
    _poll_until(consumer, "records of every partition", take)
    # a buffer left full past the hold pauses every partition (a consumer that keeps up never is)
    wait_for(lambda: all(s.paused for s in consumer._owned.values()), 20, "every partition to be paused")
    wake_ups = kafka.faults.add(Fault(api="ListOffsets", topic=filled, delay=0.0))
    everything = PARTITIONS * PER_PARTITION
    _poll_until(consumer, "every record, through pauses", lambda b: take(b) and len(seen) == everything)
    assert wake_ups.hits >= 1, "partitions were resumed without waking their leader"


def test_kept_partitions_flow_while_a_revocation_is_delayed_and_nothing_is_processed_twice(
    kafka: KafkaHandle, filled: str, closing: list[AsyncConsumer], group_protocol: str
) -> None:
    group = kafka.topic("g")
    first = AsyncConsumer(_config(kafka, group, group_protocol), [filled], ordering="key", max_in_flight=100)
    closing.append(first)
    processed: dict[str, list[tuple[TP, int]]] = {"first": [], "second": []}
    held: list[Message] = []
    # one record per key (10 keys per partition) is handed out, and held
    _poll_until(first, "the first records", _collect(held, PARTITIONS * 10))
    wait_for(lambda: first.buffered >= 1000, 20, "the first consumer to buffer ahead")

    second = AsyncConsumer(_config(kafka, group, group_protocol), [filled], ordering="key")
    closing.append(second)
    stop = threading.Event()

    def run_second() -> None:
        while not stop.is_set():
            for record in second.poll(0.05).records:
                processed["second"].append(_where(record))
                second.done(record)

    thread = threading.Thread(target=run_second)
    thread.start()
    try:
        batches = _poll_until(first, "a revocation", lambda b: b.to_be_revoked)
        revoked = batches[-1].to_be_revoked
        assert len(revoked) == PARTITIONS // 2 and not batches[-1].records
        assert first.delay_revoke(revoked)  # before the next poll, which would complete it
        for record in held:  # the work handed out before finishes now
            processed["first"].append(_where(record))
            first.done(record)
        during: list[tuple[TP, int]] = []

        def keep_delaying(batch: Batch) -> bool:
            assert first.delay_revoke(revoked), "a delayed partition was lost"
            for record in batch.records:
                during.append(_where(record))
                processed["first"].append(_where(record))
                first.done(record)
            return len(during) >= 500

        _poll_until(first, "records of the kept partitions during the revocation", keep_delaying)
        assert {tp for tp, _ in during}.isdisjoint(revoked)
        assert not second.assignment() & revoked, "revoked partitions moved before their revocation completed"

        def take(batch: Batch) -> bool:  # no more delays: the revocation completes at the next poll
            for record in batch.records:
                processed["first"].append(_where(record))
                first.done(record)
            return sum(map(len, processed.values())) == PARTITIONS * PER_PARTITION

        _poll_until(first, "every record processed by one of the two", take, timeout=40)
        assert second.assignment() == revoked
    finally:
        stop.set()
        thread.join(10)
    everything = Counter(processed["first"] + processed["second"])
    assert len(everything) == PARTITIONS * PER_PARTITION and set(everything.values()) == {1}
    assert first.revocation_waits and first.revocation_waits[0] > 0


def test_delay_revoke_holds_the_revoked_partitions_of_a_set_naming_kept_ones_too(
    kafka: KafkaHandle, filled: str, closing: list[AsyncConsumer], group_protocol: str
) -> None:
    """``delay_revoke(unfinished())`` names kept partitions too: the revoked ones must still be
    held (and returned) rather than all refused, or they complete with work unfinished and the
    next owner processes it again."""
    group = kafka.topic("g")
    first = AsyncConsumer(_config(kafka, group, group_protocol), [filled], ordering="key", max_in_flight=100)
    closing.append(first)
    processed: list[tuple[TP, int]] = []
    held: list[Message] = []
    _poll_until(first, "one record per key", _collect(held, PARTITIONS * 10))
    with pytest.raises(TypeError, match=r"\(tp\.topic, tp\.partition\)"):
        first.delay_revoke([TopicPartition(filled, 0)])  # type: ignore[list-item]
    second = AsyncConsumer(_config(kafka, group, group_protocol), [filled], ordering="key")
    closing.append(second)
    with _running(second, processed):
        revoked = _poll_until(first, "a revocation", lambda b: b.to_be_revoked)[-1].to_be_revoked
        assert first.unfinished() == {(filled, p) for p in range(PARTITIONS)}
        assert first.delay_revoke(first.unfinished()) == revoked

        for _ in range(5):  # a few more polls with the work still out: each one delays again
            assert first.poll(0.05).to_be_revoked == revoked
            assert first.delay_revoke(first.unfinished()) == revoked
        assert not second.assignment() & revoked, "revoked partitions moved with their work unfinished"
        for record in held:
            processed.append(_where(record))
            first.done(record)

        def take(batch: Batch) -> bool:  # delays only what is unfinished: nothing now
            first.delay_revoke(first.unfinished(batch.to_be_revoked))
            for record in batch.records:
                processed.append(_where(record))
                first.done(record)
            return len(processed) >= PARTITIONS * PER_PARTITION

        _poll_until(first, "every record processed by one of the two", take, timeout=40)
        assert second.assignment() == revoked
    everything = Counter(processed)
    assert len(everything) == PARTITIONS * PER_PARTITION and set(everything.values()) == {1}


class _Events:
    """Rebalance callbacks recording (member, event, partitions, the member's assignment() then),
    in one list for all members, so the order across members shows."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, frozenset[TP], set[TP]]] = []
        self.consumers: dict[str, AsyncConsumer] = {}

    def consumer(self, member: str, config: dict[str, object], topic: str) -> AsyncConsumer:
        def note(event: str) -> Listener:
            def listener(partitions: frozenset[TP]) -> None:
                consumer = self.consumers.get(member)  # None while the constructor runs
                owned = consumer.assignment() if consumer is not None else set()
                self.seen.append((member, event, partitions, owned))

            return listener

        made = self.consumers[member] = AsyncConsumer(
            config, [topic], ordering="unordered", on_assign=note("assign"), on_revoke=note("revoke"),
            on_lost=note("lost"),
        )  # fmt: skip
        return made

    def of(self, member: str, event: str) -> list[frozenset[TP]]:
        return [p for m, e, p, _ in list(self.seen) if m == member and e == event]

    def index(self, member: str, event: str, partitions: frozenset[TP]) -> int:
        return next(i for i, (m, e, p, _) in enumerate(self.seen) if (m, e, p) == (member, event, partitions))


def test_listeners_see_assignments_and_completed_revocations(
    kafka: KafkaHandle, filled: str, closing: list[AsyncConsumer], group_protocol: str
) -> None:
    group, events = kafka.topic("g"), _Events()
    everything = frozenset((filled, p) for p in range(PARTITIONS))
    first = events.consumer("first", _config(kafka, group, group_protocol), filled)
    closing.append(first)

    def process(batch: Batch) -> Batch:
        for record in batch.records:
            first.done(record)
        return batch

    _poll_until(first, "the first records", lambda b: process(b).records)
    wait_for(lambda: first.assignment() == everything, 20, "the first to own every partition")
    assert frozenset().union(*events.of("first", "assign")) == everything

    second = events.consumer("second", _config(kafka, group, group_protocol), filled)
    closing.append(second)
    processed: list[tuple[TP, int]] = []
    with _running(second, processed):
        revoked = _poll_until(first, "a revocation", lambda b: process(b).to_be_revoked)[-1].to_be_revoked
        assert events.of("first", "revoke") == [], "on_revoke before the revocation completed"
        process(first.poll(0.05))  # completes it
        wait_for(lambda: events.of("first", "revoke"), 20, "on_revoke of the first")
        assert events.of("first", "revoke") == [revoked]
        owned_then = events.seen[events.index("first", "revoke", revoked)][3]
        assert owned_then == everything - revoked, "on_revoke called while the partitions were still owned"
        wait_for(lambda: events.of("second", "assign"), 20, "on_assign of the second")
        assert events.of("second", "assign") == [revoked]
        assert events.index("first", "revoke", revoked) < events.index("second", "assign", revoked)

        first.close()  # revokes what it kept, which then moves to the second
        assert events.of("first", "revoke") == [revoked, everything - revoked]
        wait_for(lambda: len(events.of("second", "assign")) == 2, 20, "the second to get the rest")
        assert events.of("second", "assign")[1] == everything - revoked
    assert not events.of("first", "lost") and not events.of("second", "lost")


def test_an_exception_from_a_listener_fails_the_consumer_and_poll_says_why(
    kafka: KafkaHandle, filled: str, closing: list[AsyncConsumer]
) -> None:
    def broken(partitions: frozenset[TP]) -> None:
        raise RuntimeError("the user's on_assign failed")

    consumer = AsyncConsumer(_config(kafka, kafka.topic("g")), [filled], on_assign=broken)
    closing.append(consumer)
    with pytest.raises(ConsumerClosedError, match="the user's on_assign failed"):
        _poll_until(consumer, "the failure", lambda b: False)


def test_a_partition_not_released_by_its_deadline_is_lost_and_never_committed(
    kafka: KafkaHandle, filled: str, closing: list[AsyncConsumer], group_protocol: str
) -> None:
    group = kafka.topic("g")
    told: list[frozenset[TP]] = []
    first = AsyncConsumer(
        _config(kafka, group, group_protocol), [filled], ordering="partition", revoke_timeout=1.0,
        on_lost=told.append, on_revoke=told.append,
    )  # fmt: skip
    closing.append(first)
    held: list[Message] = []
    _poll_until(first, "one record of every partition", _collect(held, PARTITIONS))
    second = AsyncConsumer(_config(kafka, group, group_protocol), [filled], ordering="partition")
    closing.append(second)
    stuck = held[:]
    refused = False

    def delay_until_lost(batch: Batch) -> bool:
        nonlocal refused
        if batch.to_be_revoked:
            refused = refused or not first.delay_revoke(batch.to_be_revoked)
        return bool(batch.lost)

    batches = _poll_until(first, "the revoked partitions to be lost", delay_until_lost, timeout=30)
    lost = batches[-1].lost
    assert len(lost) == PARTITIONS // 2
    # the fetcher calls on_lost after the poll result may have told it (no order between them)
    wait_for(lambda: told, 10, "on_lost")
    assert told == [lost], "on_lost (and no on_revoke) for partitions lost at their deadline"
    assert not first.delay_revoke(lost)
    for record in stuck:  # finishing lost work afterwards changes nothing
        first.done(record)
    wait_for(lambda: second.assignment() == lost, 20, "the second to own them")
    second.close()
    first.close()
    committed = _committed(kafka, group, filled)
    for _topic, partition in lost:
        assert committed[partition] < 1, "a lost partition was committed past its unfinished record"


def test_a_member_whose_session_expires_sees_its_partitions_lost_and_the_other_processes_its_work(
    kafka: KafkaHandle, filled: str, closing: list[AsyncConsumer], group_protocol: str
) -> None:
    """The first member's heartbeats are cut (the fault proxy closes its connection at each one)
    until the broker expires its session and gives its partitions to the second member, which
    reaches the broker directly. Then the network heals. The first is told its partitions are
    lost (on_lost and Batch.lost); the record it still had out in each is not committed, not even
    once finished afterwards; the second processed it."""
    group = kafka.topic("g")
    told: list[frozenset[TP]] = []
    first = AsyncConsumer(
        _config(kafka, group, group_protocol), [filled], ordering="partition", commit_interval=0.2,
        on_lost=told.append,
    )  # fmt: skip
    closing.append(first)
    cut, held = 100, {}

    def process_below_cut(batch: Batch) -> bool:  # one record per partition is out at a time
        for record in batch.records:
            tp, offset = _where(record)
            if offset < cut:
                first.done(record)
            else:
                held[tp] = record
        return len(held) == PARTITIONS

    _poll_until(first, "every partition processed up to the cut", process_below_cut, timeout=30)
    wait_for(lambda: _committed(kafka, group, filled) == [cut] * PARTITIONS, 20, "the cut to be committed")
    # from here the first has nothing to commit: count its commits (a zero delay only observes;
    # the second member bypasses the proxy)
    commits = kafka.faults.add(Fault(api="OffsetCommit", topic=filled, delay=0.0))

    # a classic member notices the expiry itself and rejoins with JoinGroup: keep that out too.
    # librdkafka's KIP-848 member learns it only from the next heartbeat that gets through.
    cut_off = ["Heartbeat", "JoinGroup"] if group_protocol == CLASSIC else ["ConsumerGroupHeartbeat"]
    for api in cut_off:
        kafka.faults.add(Fault(api=api, drop=True))
    second_config = {**_config(kafka, group, group_protocol), "bootstrap.servers": kafka.direct_bootstrap}
    second = AsyncConsumer(second_config, [filled], ordering="partition")
    closing.append(second)
    processed: list[tuple[TP, int]] = []
    everything = frozenset((filled, p) for p in range(PARTITIONS))
    rest = {((filled, p), o) for p in range(PARTITIONS) for o in range(cut, PER_PARTITION)}
    with _running(second, processed):
        wait_for(lambda: second.assignment() == everything, 40, "the broker to expire the first's session")
        wait_for(lambda: rest <= set(processed), 30, "the second to process what the first had left")
        for fault in kafka.faults.snapshot():
            if fault.api in cut_off:
                kafka.faults.remove(fault.id)
        lost = _poll_until(first, "the first to be told", lambda b: b.lost, timeout=30)[-1].lost
        assert lost == everything
        wait_for(lambda: told, 10, "on_lost")
        assert told == [everything]
        for record in held.values():  # the first finishes its lost work: ignored
            first.done(record)
        first.close()  # its last commits are sent by now
    second.close()
    assert sorted(processed) == sorted(rest), "the second did not start at the first's commits"
    assert commits.hits == 0, "the first committed after it lost its partitions"
    assert _committed(kafka, group, filled) == [PER_PARTITION] * PARTITIONS


def test_async_for_yields_batches(kafka: KafkaHandle, filled: str, closing: list[AsyncConsumer]) -> None:
    consumer = AsyncConsumer(_config(kafka, kafka.topic("g")), [filled], ordering="key")
    closing.append(consumer)

    async def consume() -> int:
        count = 0
        async for batch in consumer:
            for record in batch.records:
                await asyncio.sleep(0)  # the user's coroutine work
                consumer.done(record)
            count += len(batch.records)
            if count == PARTITIONS * PER_PARTITION:
                return count
        return count

    assert asyncio.run(asyncio.wait_for(consume(), 30)) == PARTITIONS * PER_PARTITION


def test_bad_configuration_says_what_to_fix(kafka: KafkaHandle) -> None:
    with pytest.raises(ConfigError, match=r"group\.id"):
        AsyncConsumer(kafka.config(), ["t"])
    with pytest.raises(ConfigError, match=r"enable\.auto\.commit"):
        AsyncConsumer(kafka.config(group_id="g", enable_auto_commit=True), ["t"])
    with pytest.raises(ConfigError, match="ordering"):
        AsyncConsumer(kafka.config(group_id="g"), ["t"], ordering="fifo")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="on_revoke must be a callable"):
        AsyncConsumer(kafka.config(group_id="g"), ["t"], on_revoke=[print])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"max\.poll\.interval\.ms"):
        AsyncConsumer(kafka.config(group_id="g", max_poll_interval_ms=10_000), ["t"], revoke_timeout=20)
