"""GatedConsumer vs the raw confluent-kafka Consumer with no gate closed, side by side in
alternating rounds, straight to the broker (no fault proxy: the raw client's ceiling is Kafka's):
records/s over CONSUMED records and the process's CPU microseconds per record. The topic is an
expanded one (2 -> 4, gates already open), so every record goes through the gate's checks."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLogWriter, ensure_log_topics
from ordo.gated_consumer import GatedConsumer

from ._result import Result, Stopwatch
from ._testbed import kafka_bootstrap

CONSUMED = 1_000_000  # records per consumer run: a few seconds for the raw client on Kafka
ROUNDS = 5
Sample = tuple[float, float]  # (records/s, CPU µs/record)


def _consume(make: Callable[[], Consumer | GatedConsumer], total: int) -> Sample:
    consumer = make()
    got = 0
    clock = Stopwatch()
    while got < total:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                got += 1
    sample = clock.rate(total), clock.cpu_us(total)
    consumer.close()
    return sample


def _fill(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ensure_log_topics(admin)
    admin.create_topics([NewTopic("gated", 4)])["gated"].result(10)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "queue.buffering.max.messages": 1_000_000}
    )
    for i in range(CONSUMED):
        while True:
            try:
                producer.produce("gated", b"x" * 100, key=str(i).encode(), partition=i % 4)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    EpochLogWriter({"bootstrap.servers": bootstrap}).write(
        EpochHistory.initial("gated", 2).begin_fence(4).publish({0: 0, 1: 0})
    )


def _rounds(bootstrap: str) -> dict[str, list[Sample]]:
    """Each round one run of each side, the first side alternating."""
    assign = [TopicPartition("gated", p, 0) for p in range(4)]
    # both sides as a tuned user would read: batched consume(), large fetches (10 MB a partition
    # doubles the raw client's rate here against librdkafka's 1 MB: fewer fetch round trips)
    config = {
        "bootstrap.servers": bootstrap,
        "fetch.min.bytes": 100_000,
        "max.partition.fetch.bytes": 10 * 1024 * 1024,
        "enable.auto.commit": False,
    }
    samples: dict[str, list[Sample]] = {"raw": [], "gated": []}
    for run in range(ROUNDS):

        def raw(run: int = run) -> Consumer:
            consumer = Consumer({**config, "group.id": f"raw-{run}"})
            consumer.assign(assign)
            return consumer

        def gated(run: int = run) -> GatedConsumer:
            return GatedConsumer({**config, "group.id": f"gated-{run}"}, ["gated"], assignment=assign)

        sides: dict[str, Callable[[], Consumer | GatedConsumer]] = {"raw": raw, "gated": gated}
        for name in sides if run % 2 else reversed(sides):
            samples[name].append(_consume(sides[name], CONSUMED))
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
