"""``python -m ordo_sandbox.scenario.producer``: a keyed producer that numbers each key's records.

Writes "key seq partition offset" for every delivered record to ``--out`` when it stops
(SIGTERM). ``--plain`` uses the raw confluent-kafka Producer with librdkafka's own partitioner:
the control that reorders.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Producer

from ordo.client_config import logged
from ordo.control_topics import DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC
from ordo.errors import ProduceBlockedError
from ordo.ordered_producer import OrderedProducer
from ordo_sandbox.kafka_settings import add_kafka_arguments, settings_from
from ordo_sandbox.scenario._program import Pacer, stop_on_signals
from ordo_sandbox.scenario.records import Numbered, decode, encode, key_name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ordo_sandbox.scenario.producer")
    add_kafka_arguments(parser)
    parser.add_argument("--topic", required=True)
    parser.add_argument(
        "--id", type=int, required=True, help="producer number (keys are disjoint per producer)"
    )
    parser.add_argument("--keys", type=int, default=250)
    parser.add_argument("--rate", type=float, default=500.0, help="records per second (0: unpaced)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--plain", action="store_true", help="raw Producer, librdkafka partitioner (control)")
    parser.add_argument("--epoch-topic", default=DEFAULT_EPOCH_TOPIC)
    parser.add_argument("--registry-topic", default=DEFAULT_REGISTRY_TOPIC)
    parser.add_argument("--session-timeout", type=float, default=3.0)
    parser.add_argument(
        "--linger-ms", type=int, default=5, help="how long records wait in librdkafka's queue"
    )
    parser.add_argument(
        "--fencing",
        choices=("broker", "lease"),
        default="broker",
        help="OrderedProducer's fencing: broker (its own transactions, Kafka fences it) or lease",
    )
    parser.add_argument(
        "--partitioner",
        choices=("murmur2", "round_robin"),
        default="murmur2",
        help="OrderedProducer's partitioner (keyed records either way; round_robin ignores the key)",
    )
    parser.add_argument(
        "--delivery-timeout-ms",
        type=int,
        help="message.timeout.ms (default: ordo's, librdkafka's for --plain)",
    )
    args = parser.parse_args(argv)
    if args.plain and args.partitioner != "murmur2":
        parser.error("--partitioner is OrderedProducer's: --plain uses librdkafka's murmur2_random")
    kafka = settings_from(args, parser)

    stop = stop_on_signals()
    config: dict[str, Any] = {
        **kafka,
        "linger.ms": args.linger_ms,
        "enable.idempotence": True,
    }
    if args.delivery_timeout_ms is not None:
        config["message.timeout.ms"] = args.delivery_timeout_ms
    delivered: list[str] = []

    def on_delivery(error: KafkaError | None, message: Any) -> None:
        record = decode(message.value())
        if error is None:
            delivered.append(f"{record.key} {record.seq} {message.partition()} {message.offset()}")
        else:  # lost: the verifier reports it missing, this says why
            print(
                f"delivery of {record.key} #{record.seq} to p{message.partition()} failed: {error}",
                file=sys.stderr,
                flush=True,
            )

    producer: OrderedProducer | Producer
    if args.plain:
        producer = Producer(
            logged({**config, "partitioner": "murmur2_random", "topic.metadata.refresh.interval.ms": 500})
        )
    else:
        producer = OrderedProducer(
            config,
            producer_id=f"scenario-producer-{args.id}",
            session_timeout=args.session_timeout,
            block_timeout=60.0,
            epoch_topic=args.epoch_topic,
            registry_topic=args.registry_topic,
            fencing=args.fencing,
            partitioner=args.partitioner,
        )
    rng = random.Random(args.id)
    sequence = [0] * args.keys
    pacer = Pacer(args.rate)
    print("ready", flush=True)
    while not stop.is_set():
        index = rng.randrange(args.keys)
        record = Numbered(key_name(args.id, index), sequence[index])
        try:
            producer.produce(args.topic, encode(record), key=record.key.encode(), on_delivery=on_delivery)
        except ProduceBlockedError:
            continue  # held by a long fence: retry the same record, nothing is dropped
        except BufferError:
            producer.poll(0.1)
            continue
        sequence[index] += 1
        producer.poll(0)
        pacer.wait(stop)
    unsent = producer.flush(60)
    if unsent:  # neither delivered nor failed: the verifier counts them missing, this says why
        print(f"{unsent} records still unacknowledged after flush(60)", file=sys.stderr, flush=True)
    if isinstance(producer, OrderedProducer):
        producer.close()
    args.out.write_text("".join(line + "\n" for line in delivered))
    return 0


if __name__ == "__main__":
    sys.exit(main())
