"""The Kafka client configs of ``ordo bench eos``, from its options, as Kafka's perf tools take them
(KIP-609): ``--producer-config``/``--consumer-config`` properties files, then
``--producer-props``/``--consumer-props`` ``key=value`` pairs over them, then what the benchmark
itself must set (the files and pairs are read by :mod:`ordo.connection`). Pure: files are read by
the caller.

The producer config goes to every producer-side client (the transactional producer, the one that
fills the input topic, the admin client: librdkafka's admin client is a producer handle); the
consumer config to the consumer and to the read_committed reader that verifies the output. So a
SASL or TLS cluster needs its settings once per side, as with Kafka's own tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["EosConfigError", "EosConfigs", "eos_configs"]

# Set by the benchmark: it commits offsets in its transactions and verifies with read_committed.
_CONSUMER_OWNED = {"enable.auto.commit": "false", "isolation.level": "read_committed"}
_TRANSACTION_ONLY = ("transactional.id", "transaction.timeout.ms")


class EosConfigError(ValueError):
    """An option the benchmark cannot use, with what to do instead."""


@dataclass(frozen=True)
class EosConfigs:
    producer: dict[str, str]
    """The transactional producer's config (with transactional.id)."""
    consumer: dict[str, str]
    """The consumer's config (with group.id, read_committed, no auto-commit)."""

    @property
    def plain_producer(self) -> dict[str, str]:
        """For the admin client and the producer that fills the input: not transactional."""
        return {k: v for k, v in self.producer.items() if k not in _TRANSACTION_ONLY}

    @property
    def bootstrap(self) -> str:
        return self.producer["bootstrap.servers"]


def eos_configs(
    bootstrap: str | None,
    producer: Mapping[str, str],
    consumer: Mapping[str, str],
    group_id: str,
    transactional_id: str,
) -> EosConfigs:
    """The two configs: ``producer``/``consumer`` are the files' pairs with the props over them.
    ``--bootstrap``, when given, is the default of both sides' bootstrap.servers."""
    producer, consumer = dict(producer), dict(consumer)
    for side, config in (("producer", producer), ("consumer", consumer)):
        if bootstrap:
            config.setdefault("bootstrap.servers", bootstrap)
        if not config.get("bootstrap.servers"):
            raise EosConfigError(
                f"no Kafka for the {side}: give --bootstrap, or bootstrap.servers in --{side}-config "
                f"or --{side}-props"
            )
    for key, wanted in _CONSUMER_OWNED.items():
        given = consumer.get(key)
        if given is not None and given.lower() != wanted:
            raise EosConfigError(
                f"consumer {key}={given}: the benchmark needs {wanted} (it commits offsets in its "
                "transactions and reads read_committed); leave it out"
            )
    if consumer.get("group.id", group_id) != group_id:
        raise EosConfigError(
            f"consumer group.id={consumer['group.id']}: give the group with --consumer-group-id"
        )
    if producer.get("enable.idempotence", "true").lower() != "true":
        raise EosConfigError("producer enable.idempotence=false: transactions need it; leave it out")
    producer["transactional.id"] = transactional_id
    consumer.update(_CONSUMER_OWNED, **{"group.id": group_id})
    return EosConfigs(producer, consumer)
