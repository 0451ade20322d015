"""The settings ordo gives the Kafka clients it creates, for clients built beside ordo's (a
harness's, a benchmark's raw side measured against ordo's) that are to behave the same way.

``logged(config) -> dict``
    ``config`` with librdkafka's log lines sent to Python logging (logger ``ordo.librdkafka``)
    instead of straight to the process's stderr; a ``logger`` the caller gave stays.
``drain(client)``
    Serve what a client not polled in the course of its work has queued (its log lines, error
    events): a ``logged`` client hands its lines over only when polled.
``bounded_delivery(config) -> (dict, int)``
    An OrderedProducer's producer settings: queued records written or failed within
    ``message.timeout.ms`` (30 s unless set), idempotence on unless set or acks are not all.
    Returns the config and the delivery timeout in ms; ConfigError for an unbounded one.
``FETCH_QUEUE_BACKOFF_MS``
    ordo's consumers' ``fetch.queue.backoff.ms`` unless the user sets one.
``BrokerErrors()``, ``cluster_metadata(client, errors, bootstrap, timeout)``
    A one-off client's ``error_cb`` and its first question: the cluster's metadata, or a
    ConnectionError saying why as soon as every broker is down, instead of waiting out ``timeout``.

The code lives in ordo's internal ``_clients`` module; this is its name.
"""

from __future__ import annotations

from ._clients import FETCH_QUEUE_BACKOFF_MS, BrokerErrors, bounded_delivery, cluster_metadata, drain, logged

__all__ = [
    "FETCH_QUEUE_BACKOFF_MS",
    "BrokerErrors",
    "bounded_delivery",
    "cluster_metadata",
    "drain",
    "logged",
]
