"""The operator's own configuration, from the environment (the Helm chart sets it)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from ordo.api import KafkaAuthentication, KafkaTls
from ordo.connection import InvalidConnectionError, librdkafka_config, mounted_secrets
from ordo.control_topics import DEFAULT_EPOCH_TOPIC, DEFAULT_REGISTRY_TOPIC

__all__ = ["DEFAULT_SECRETS_DIR", "OperatorConfig"]

DEFAULT_SECRETS_DIR = "/etc/ordo/kafka-secrets"  # where the chart mounts the default Kafka's Secrets


@dataclass(frozen=True)
class OperatorConfig:
    kafka_bootstrap: str | None = None
    """Default Kafka for resources without ``spec.kafka``."""
    kafka_options: dict[str, Any] = field(default_factory=dict)
    """Default librdkafka options, raw (the escape hatch: ``kafka.options`` and ``kafka.secret``)."""
    kafka_authentication: KafkaAuthentication | None = None
    """The default Kafka's authentication, Strimzi's shape (``kafka.authentication``)."""
    kafka_tls: KafkaTls | None = None
    """The default Kafka's TLS (``kafka.tls``)."""
    kafka_secrets_dir: str = DEFAULT_SECRETS_DIR
    """Where the Secrets that authentication and tls name are mounted, one folder each."""
    epoch_topic: str = DEFAULT_EPOCH_TOPIC
    registry_topic: str = DEFAULT_REGISTRY_TOPIC
    max_partitions: int = 100_000
    """Largest partition count an expansion may ask for (the broker's own limit may be lower)."""
    kafka_timeout_seconds: float = 15.0
    """How long one Kafka admin request (metadata, end offsets, CreatePartitions) may take."""
    partitions_check_seconds: float = 60.0
    """How often a completed expansion checks that its topic has no partitions added outside ordo."""
    topic_check_seconds: float = 5.0
    """How often the topic watch judges every topic ordo's producers write (operator/topics.py)."""
    straggler_margin_seconds: float = 5.0
    """A fence waits for a producer that fell silent until its session and delivery timeout have
    passed since its last report, and this much more: for a Produce request the network delivers
    after the client gave up on it (docs/reliability.md)."""
    orphan_fence_seconds: float = 300.0
    """A fencing epoch with no OrderedTopicExpansion of its topic in flight for this long is an
    orphan (its expansion is gone) and the topic watch aborts it; 0: never. Longer than a
    restarted operator takes to drive its expansions again. Operators that share a Kafka cluster
    and its epoch log without seeing each other's expansions (several namespace-scoped installs)
    would abort each other's fences: give each its own epoch log, or turn this off."""
    peering_lifetime_seconds: int = 60
    """kopf peering: how long a replica counts as alive after its last keepalive, so how soon a
    standby takes over from one that died without a word (kopf's default: 60)."""
    max_workers: int = 1_024
    """Threads for kopf's synchronous handlers. Each ProducerGroup and each expansion in flight
    holds one for as long as it lives (its daemon), and the pod and Lease events that wake groups
    need the rest: with kopf's default (CPUs + 4: 6 on 2 cores) a 6th group took the last thread
    and no wake-up ran again, a 7th was never served. Created only when needed."""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> OperatorConfig:
        env = dict(os.environ if env is None else env)
        options = json.loads(env.get("ORDO_KAFKA_OPTIONS", "{}") or "{}")
        if not isinstance(options, dict):
            raise ValueError("ORDO_KAFKA_OPTIONS must be a JSON object of librdkafka options")
        for name, value in env.items():  # ORDO_KAFKA_SASL_PASSWORD=… → sasl.password (from a Secret)
            if name.startswith("ORDO_KAFKA_OPT_"):
                options[name.removeprefix("ORDO_KAFKA_OPT_").lower().replace("_", ".")] = value
        try:  # the chart writes these from kafka.authentication and kafka.tls
            authentication = _json_model(KafkaAuthentication, env.get("ORDO_KAFKA_AUTHENTICATION"))
            tls = _json_model(KafkaTls, env.get("ORDO_KAFKA_TLS"))
        except ValueError as error:
            raise InvalidConnectionError(
                f"the operator's default Kafka (chart values kafka.authentication, kafka.tls): {error}"
            ) from None
        return cls(
            kafka_bootstrap=env.get("ORDO_KAFKA_BOOTSTRAP") or None,
            kafka_options=options,
            kafka_authentication=authentication,
            kafka_tls=tls,
            kafka_secrets_dir=env.get("ORDO_KAFKA_SECRETS_DIR") or DEFAULT_SECRETS_DIR,
            epoch_topic=env.get("ORDO_EPOCH_TOPIC", DEFAULT_EPOCH_TOPIC),
            registry_topic=env.get("ORDO_REGISTRY_TOPIC", DEFAULT_REGISTRY_TOPIC),
            max_partitions=int(env.get("ORDO_MAX_PARTITIONS", "100000")),
            kafka_timeout_seconds=float(env.get("ORDO_KAFKA_TIMEOUT_SECONDS", "15")),
            partitions_check_seconds=float(env.get("ORDO_PARTITIONS_CHECK_SECONDS", "60")),
            topic_check_seconds=float(env.get("ORDO_TOPIC_CHECK_SECONDS", "5")),
            straggler_margin_seconds=float(env.get("ORDO_STRAGGLER_MARGIN_SECONDS", "5")),
            orphan_fence_seconds=float(env.get("ORDO_ORPHAN_FENCE_SECONDS", "300")),
            peering_lifetime_seconds=int(env.get("ORDO_PEERING_LIFETIME_SECONDS", "60")),
            max_workers=int(env.get("ORDO_MAX_WORKERS", "1024")),
        )

    def kafka_config(self) -> dict[str, str]:
        """librdkafka settings for the default Kafka (its Secrets read from the mounted folder);
        raises InvalidConnectionError naming the chart value at fault."""
        return librdkafka_config(
            self.kafka_bootstrap or "",
            self.kafka_authentication,
            self.kafka_tls,
            {k: str(v) for k, v in self.kafka_options.items()},
            secrets=mounted_secrets(self.kafka_secrets_dir),
            where="the operator's default Kafka: kafka",
        )


def _json_model(model: type[KafkaAuthentication] | type[KafkaTls], text: str | None) -> Any:
    return model.model_validate_json(text) if text else None
