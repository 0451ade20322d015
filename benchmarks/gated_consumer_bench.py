"""GatedConsumer vs the raw confluent-kafka Consumer with no gate closed, side by side in
rounds of alternating blocks, straight to the broker (no fault proxy: the raw client's ceiling is
Kafka's): records/s over CONSUMED records and the process's CPU microseconds per record. The topic is an
expanded one (2 -> 4, gates already open), so every record goes through the gate's checks, and the
keyed records of its old partitions 0 and 1 (half of them) through the misplaced-record check: each
key is placed by murmur2 with the epoch's 4 partitions, as ordo's producers place it."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ordo.client_config import FETCH_QUEUE_BACKOFF_MS
from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo.gated_consumer import GatedConsumer
from ordo.partitioners import murmur2_partition

from ._result import Result, alternate, per_record
from ._testbed import kafka_bootstrap

CONSUMED = 6_000_000  # records per side per round
BLOCK = 150_000  # records per block: each side reads the topic in blocks, the two in turn
COUNTED = CONSUMED - 2 * BLOCK  # per side per round: its first block is uncounted, one is left over
ROUNDS = 5
Sample = tuple[float, float]  # (records/s, CPU µs/record)


def _block(consumer: Consumer | GatedConsumer, records: int) -> None:
    """Read ``records`` records."""
    got = 0
    while got < records:
        for message in consumer.consume(min(10_000, records - got), 1.0):
            if message.error() is None:
                got += 1


def _round(sides: dict[str, Consumer | GatedConsumer], gated_first: bool) -> dict[str, Sample]:
    """One round: each side reads the topic in blocks of BLOCK, the two in turn (``alternate``;
    per-round ratios 0.84-1.17 as whole runs, with the gate's checks switched off). While one side
    reads, the other's librdkafka fetches ahead, as much for either side: the CPU figures include
    that, alike on both sides (pausing the side that waits instead made each of its blocks start
    with a refetch: 250,000-400,000 records/s).

    A block first, uncounted, per side, the side that leads first: a fresh consumer's first block
    starts from an empty queue and its first fetches, where the other side's queue has filled
    meanwhile. Counted from the start, that went to whichever side led the round: 0.90-0.94 in
    the rounds the GatedConsumer led, 1.01-1.04 in the others (one run)."""
    order = list(sides) if gated_first else list(reversed(sides))
    for name in order:
        _block(sides[name], BLOCK)
    reads = {name: (lambda _, consumer=consumer: _block(consumer, BLOCK)) for name, consumer in sides.items()}
    spent = alternate(COUNTED // BLOCK, reads, gated_first)
    return {name: per_record(took, COUNTED) for name, took in spent.items()}


def _fill(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ensure_log_topics(admin)
    admin.create_topics([NewTopic("gated", 4)])["gated"].result(10)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "queue.buffering.max.messages": 1_000_000}
    )
    for i in range(CONSUMED):
        key = str(i).encode()
        while True:
            try:
                producer.produce("gated", b"x" * 100, key=key, partition=murmur2_partition(key, 4))
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    EpochLogWriter({"bootstrap.servers": bootstrap}).write(
        EpochHistory.initial("gated", 2).begin_fence(4).publish({0: 0, 1: 0})
    )


def _rounds(bootstrap: str) -> dict[str, list[Sample]]:
    """ROUNDS rounds, each with a fresh consumer per side reading the topic from the start."""
    assign = [TopicPartition("gated", p, 0) for p in range(4)]
    # both sides as a tuned user would read: batched consume(), large fetches (10 MB a partition
    # doubles the raw client's rate here against librdkafka's 1 MB: fewer fetch round trips), and
    # a full local queue refilled soon (librdkafka's 1 s fetch.queue.backoff.ms halved the raw
    # client's rate: the GatedConsumer's default, ordo.client_config.FETCH_QUEUE_BACKOFF_MS)
    config = {
        "bootstrap.servers": bootstrap,
        "fetch.min.bytes": 100_000,
        "max.partition.fetch.bytes": 10 * 1024 * 1024,
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        "enable.auto.commit": False,
    }
    samples: dict[str, list[Sample]] = {"raw": [], "gated": []}
    for run in range(-1, ROUNDS):  # round -1 warms up, uncounted: the first reads after the fill
        # met a broker still writing it out (the first side of the first round 25% slower)
        raw = Consumer({**config, "group.id": f"raw-{run}"})
        raw.assign(assign)
        gated = GatedConsumer({**config, "group.id": f"gated-{run}"}, ["gated"], assignment=assign)
        if run < 0:
            _block(raw, BLOCK)
            _block(gated, BLOCK)
        else:
            for name, sample in _round({"gated": gated, "raw": raw}, gated_first=run % 2 == 0).items():
                samples[name].append(sample)
        raw.close()
        gated.close()
    return samples


def run() -> list[Result]:
    with kafka_bootstrap() as bootstrap:
        _fill(bootstrap)
        samples = _rounds(bootstrap)
    gated, raw = samples["gated"], samples["raw"]
    rounds = zip(gated, raw, strict=True)
    shown = ", ".join(f"{g:,.0f}/{r:,.0f} {gc:.2f}/{rc:.2f}" for (g, gc), (r, rc) in rounds)
    print(f"  per round (gated / raw rec/s, CPU µs/record): {shown}")
    return [
        Result.paired(
            "GatedConsumer vs raw Consumer, gates open",
            [rate for rate, _ in gated],
            [rate for rate, _ in raw],
            "rec/s",
            ">= 0.9",
            ([cpu for _, cpu in gated], [cpu for _, cpu in raw]),
        )
    ]
