"""How ordo configures the Kafka clients it creates.

- librdkafka's own log lines (``FAIL``, ``CONFWARN``, ...) go to Python logging, logger
  ``ordo.librdkafka``, instead of straight to the process's stderr (``logged``). A client given a
  ``logger`` hands its lines over only when it is polled, so ordo polls the clients it does not
  otherwise poll after each use and before closing them (``drain``).
- A consumer ordo builds from a user's config (the epoch log and registry readers of a producer,
  the progress reader of a GatedConsumer) gets the consumer-side properties only
  (``consumer_side``): librdkafka warns about every producer property given to a consumer.
- A one-off reader says at once that no broker can be reached, and why (``BrokerErrors`` and
  ``cluster_metadata``), instead of waiting out its timeout.
- A consumer that assigns partitions by hand asks for their topics' metadata first
  (``assign_known``): assigned to a client that does not know the topic yet, a partition may wait
  for librdkafka's next topic scan (once a second) or offset-query retry (500 ms) before its first
  fetch. Measured: one start in two lost a whole second.
- A client that only asks about a partition (a probe neither assigned nor producing it, an
  admin client) asks for its topic's metadata after a failed question (``relearn_leaders``):
  librdkafka would otherwise keep the leader and leader epoch it learnt first until its periodic
  refresh, 5 minutes.
- A consumer that hands records to an application at full speed refills its local queue soon
  after the queue passed ``queued.min.messages`` (``fast_refill``): librdkafka's default waits
  ``fetch.queue.backoff.ms`` (1 s) before it fetches that partition again, and a consumer at
  650,000 records/s drains the queue long before, then waits: 0.6-0.75 s stalls twice per
  million records, half the raw client's rate (docs/performance.md).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from .errors import ConfigError

__all__ = [
    "LIBRDKAFKA_LOGGER",
    "PRODUCER_ONLY",
    "READ_COMMITTED",
    "BrokerErrors",
    "assign_known",
    "bounded_delivery",
    "cluster_metadata",
    "committed_reads",
    "consumer_side",
    "drain",
    "fast_refill",
    "logged",
    "relearn_leaders",
]

LIBRDKAFKA_LOGGER = logging.getLogger("ordo.librdkafka")

# The properties librdkafka's configuration reference marks producer-only ("P"), global and topic
# level, with their aliases, for librdkafka 2.16 (its callbacks, set through the C API, cannot
# appear in a Python config); plus confluent-kafka's own ``on_delivery``, which a consumer refuses.
# A consumer given any other of them logs CONFWARN "... is a producer property and will be ignored
# by this consumer instance" (tests/unit/test_clients.py holds each of them to that).
PRODUCER_ONLY = frozenset(
    {
        "transactional.id",
        "transaction.timeout.ms",
        "enable.idempotence",
        "enable.gapless.guarantee",
        "queue.buffering.max.messages",
        "queue.buffering.max.kbytes",
        "queue.buffering.max.ms",
        "linger.ms",
        "message.send.max.retries",
        "retries",
        "queue.buffering.backpressure.threshold",
        "compression.codec",
        "compression.type",
        "compression.level",
        "batch.num.messages",
        "batch.size",
        "delivery.report.only.error",
        "sticky.partitioning.linger.ms",
        "request.required.acks",
        "acks",
        "request.timeout.ms",
        "message.timeout.ms",
        "delivery.timeout.ms",
        "queuing.strategy",
        "produce.offset.report",
        "partitioner",
        "on_delivery",
    }
)


def logged(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with librdkafka's log lines sent to Python logging (``ordo.librdkafka``); a
    ``logger`` the caller gave stays."""
    return {"logger": LIBRDKAFKA_LOGGER, **config}


FETCH_QUEUE_BACKOFF_MS = 20
"""ordo's consumers' ``fetch.queue.backoff.ms`` unless the user sets one: 20 and 100 gave the
same rate and CPU per record as 5 (twice the rate at librdkafka's 1,000)."""


def fast_refill(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with ``fetch.queue.backoff.ms`` at ``FETCH_QUEUE_BACKOFF_MS`` unless it sets one."""
    return {"fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS, **config}


TRANSACTION_RETRY_BACKOFF_MS = 20
"""ordo's transactional producers' ``retry.backoff.ms`` unless the user sets a backoff. A
transaction begun right after a commit meets the coordinator still writing the last one's markers:
librdkafka retries the refused AddPartitionsToTxn after 20 ms but AddOffsetsToTxn after
``retry.backoff.ms`` (100 ms, growing), which held a consume-transform-produce loop to a third of
its rate (measured: 5-19k records/s, 15-29k at 20 ms). 20 ms is the Java client's backoff for it."""


def quick_transaction_retries(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with ``retry.backoff.ms`` at ``TRANSACTION_RETRY_BACKOFF_MS`` when it is
    transactional and sets neither ``retry.backoff.ms`` nor ``retry.backoff.max.ms``."""
    if "transactional.id" not in config or {"retry.backoff.ms", "retry.backoff.max.ms"} & set(config):
        return dict(config)
    return {"retry.backoff.ms": TRANSACTION_RETRY_BACKOFF_MS, **config}


DELIVERY_TIMEOUT_MS = 30_000
"""An OrderedProducer's ``message.timeout.ms`` unless the user sets one (librdkafka's is 300 s,
the Java client's delivery.timeout.ms 120 s). A fence waits, after a silent producer's session,
for what it queued to be written or failed: this long at most (docs/reliability.md). 30 s rides
out a broker's failover (KRaft fences a dead broker after 9 s)."""


def bounded_delivery(config: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """``config`` for a producer whose queued records are written or failed within a bound:
    ``message.timeout.ms`` at ``DELIVERY_TIMEOUT_MS`` unless set (or the transaction timeout, if
    that is shorter: librdkafka refuses a longer one), and idempotence on (a retried batch written
    twice, or out of order, would break the order ordo keeps). Returns the config and the delivery
    timeout in ms; ConfigError for an unbounded timeout, acks other than all, or idempotence off."""
    given = {config[name] for name in ("message.timeout.ms", "delivery.timeout.ms") if name in config}
    if len(given) > 1:
        raise ConfigError("message.timeout.ms and delivery.timeout.ms (its alias) differ: set one")
    result = dict(config)
    if given:
        timeout = int(given.pop())
        if timeout <= 0:
            raise ConfigError(
                "message.timeout.ms must be positive for an OrderedProducer: with 0 (no limit) a paused "
                "producer could land records by an old partition count at any later time"
            )
    else:
        timeout = DELIVERY_TIMEOUT_MS
        if "transactional.id" in config and "transaction.timeout.ms" in config:
            timeout = min(timeout, int(config["transaction.timeout.ms"]))
        result["message.timeout.ms"] = timeout
    acks = str(config.get("acks", config.get("request.required.acks", "all")))
    if acks not in ("all", "-1"):
        raise ConfigError(
            f"acks={acks}: ordo's producers need acks=all (librdkafka's default). With fewer, a "
            "leader's failover loses records it acknowledged, and librdkafka turns idempotence off, "
            "so a retried batch can be written twice or out of order; leave acks out or set it to all"
        )
    if str(config.get("enable.idempotence", True)).lower() in ("false", "0"):
        raise ConfigError(
            "enable.idempotence=false: ordo's producers need idempotence, or a retried batch can be "
            "written twice or out of order within a key; leave enable.idempotence out"
        )
    result.setdefault("enable.idempotence", True)
    return result, timeout


READ_COMMITTED = "read_committed"


def committed_reads(config: Mapping[str, Any], reader: str, instead: str) -> dict[str, Any]:
    """``config`` reading committed records only (librdkafka's default, made explicit), for a
    gated ``reader``; ConfigError for another ``isolation.level``, naming what to do ``instead``. A
    producer fenced through Kafka at an expansion leaves an aborted transaction of records placed
    by the old partition count, which only read_committed readers skip (docs/reliability.md)."""
    level = config.get("isolation.level")
    if level is not None and str(level).lower() != READ_COMMITTED:
        raise ConfigError(
            f"{reader} reads committed records only, got isolation.level={level!r}: a producer "
            "fenced at an expansion leaves an aborted transaction of records placed by the old "
            "partition count, which read_uncommitted would deliver out of order; remove "
            f"isolation.level (read_committed is the default), or {instead}"
        )
    return {**config, "isolation.level": READ_COMMITTED}


def consumer_side(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` without the producer-only properties, for a consumer built from any client's
    config."""
    return {k: v for k, v in config.items() if k not in PRODUCER_ONLY}


def assign_known(consumer: Consumer, partitions: list[TopicPartition], timeout: float = 1.0) -> None:
    """``consumer.assign(partitions)`` once the client knows their topics' leaders. A topic it
    cannot learn about in ``timeout`` (a broker down, a topic not created yet) is assigned all the
    same: librdkafka then finds the leader itself, as it would have (waiting longer than the
    second this saves gains nothing)."""
    for topic in dict.fromkeys(tp.topic for tp in partitions):
        with contextlib.suppress(KafkaException):
            consumer.list_topics(topic, timeout=timeout)
    consumer.assign(partitions)


def relearn_leaders(client: Any, topic: str, timeout: float = 1.0) -> None:
    """Ask for ``topic``'s metadata now, so the client's next request goes to the leader of the
    moment, with its current leader epoch. After a broker died (testbed cluster, 3 brokers), a
    probe's ListOffsets waited in the dead broker's queue until the periodic refresh, 278-292 s
    in 2 kills of 3, and an admin client's were refused FENCED_LEADER_EPOCH for as long (881 s)
    once leadership had moved again; with this they were answered 1-2 s after the failover."""
    with contextlib.suppress(KafkaException):
        client.list_topics(topic, timeout=timeout)


def drain(client: Any) -> None:
    """Serve what a client not polled in the course of its work has queued: its log lines (and
    error events). For a consumer, only one that has no assignment: a poll would take a record."""
    with contextlib.suppress(RuntimeError):  # closed already: nothing is left to serve
        client.poll(0)


class BrokerErrors:
    """A client's ``error_cb`` (served when it is polled) that remembers whether every broker
    is down and the last reason a connection failed."""

    def __init__(self) -> None:
        self.all_down = False
        self.reason: str | None = None

    def __call__(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self.all_down = True
        elif error.code() in (KafkaError._TRANSPORT, KafkaError._RESOLVE, KafkaError._AUTHENTICATION):
            self.reason = error.str()


def cluster_metadata(client: Any, errors: BrokerErrors, bootstrap: str, timeout: float) -> Any:
    """The cluster's metadata (``list_topics()`` of every topic) from a client whose
    ``error_cb`` is ``errors``. Raises ConnectionError as soon as every broker is down (refused,
    unresolvable, failing authentication), saying why, and after ``timeout`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            return client.list_topics(timeout=max(0.1, min(0.5, left)))
        except KafkaException as error:
            drain(client)  # serves the error events
            if errors.all_down or left <= 0.5:
                why = errors.reason or error.args[0].str()
                raise ConnectionError(f"cannot reach Kafka at {bootstrap}: {why}") from None
