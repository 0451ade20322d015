"""The ``ordo-kafka`` source's options, parsed once on the driver into a frozen value.

Names follow Spark's Kafka source where they mean the same (``subscribe``, ``startingOffsets``,
``failOnDataLoss``, ``kafka.*``); unknown options are refused so that a typo is not silently
ignored. Every error names the option and says what is accepted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ordo.errors import ConfigError
from ordo.protocol import DEFAULT_EPOCH_TOPIC

__all__ = ["EARLIEST", "LATEST", "SourceOptions", "StartingOffsets", "parse_options"]

EARLIEST = -2  # Spark's Kafka source spells these -2 and -1 in startingOffsets JSON
LATEST = -1

StartingOffsets = Literal["earliest", "latest"] | dict[str, dict[int, int]]

_KNOWN = {
    "subscribe": "comma-separated topics",
    "startingoffsets": 'earliest | latest | JSON like {"orders": {"0": 42, "1": -2}}',
    "maxrecordspertrigger": "records per micro-batch, a positive integer",
    "failondataloss": "true | false",
    "epochtopic": f"the epoch log topic (default {DEFAULT_EPOCH_TOPIC})",
    "gate": "true | false: hold records of a new epoch until their prior partitions are done",
    "polltimeoutms": "how long a task waits for records that should exist, in ms",
}
# Options the source manages itself: a user value would break offsets or gates.
_MANAGED = {
    "enable.auto.commit": "the source tracks offsets in Spark's checkpoint, never in Kafka",
    "auto.offset.reset": "use startingOffsets and failOnDataLoss instead",
    "enable.partition.eof": "the source needs partition-end events to finish a task",
}
# Fetch settings for reading whole offset ranges (Spark's tasks read many records at once).
_FETCH_DEFAULTS = {
    "fetch.max.bytes": "104857600",
    "max.partition.fetch.bytes": "16777216",
    "queued.min.messages": "200000",
    "fetch.wait.max.ms": "50",
}


@dataclass(frozen=True)
class SourceOptions:
    """Everything the source needs; picklable (it travels to executors with the reader)."""

    topics: tuple[str, ...]
    kafka: Mapping[str, str]
    starting: StartingOffsets = "latest"
    max_records: int | None = None
    fail_on_data_loss: bool = True
    epoch_topic: str = DEFAULT_EPOCH_TOPIC
    gate: bool = True
    poll_timeout_ms: int = 120_000
    fetch: Mapping[str, str] = field(default_factory=lambda: dict(_FETCH_DEFAULTS))

    def consumer_config(self, purpose: str) -> dict[str, Any]:
        """A librdkafka consumer config: fetch defaults, the user's ``kafka.*``, then ours."""
        config: dict[str, Any] = {**self.fetch, "group.id": f"ordo-spark-{purpose}"}
        config.update(self.kafka)
        config.update(
            {"enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "error"}
        )
        return config

    @property
    def client_config(self) -> dict[str, str]:
        """The user's ``kafka.*`` options alone (for the epoch log reader)."""
        return dict(self.kafka)


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Parse Spark's (case-insensitive, all-string) options; ConfigError names the bad option."""
    lowered = {k.lower(): v for k, v in options.items()}
    kafka = {k[len("kafka.") :]: v for k, v in lowered.items() if k.startswith("kafka.")}
    unknown = sorted(k for k in lowered if not k.startswith("kafka.") and k not in _KNOWN)
    if unknown:
        known = ", ".join(f"{k} ({why})" for k, why in _KNOWN.items())
        raise ConfigError(f"ordo-kafka: unknown option(s) {unknown}; known: {known}, and kafka.*")
    for name, why in _MANAGED.items():
        if name in kafka:
            raise ConfigError(f"ordo-kafka: option kafka.{name} is not supported: {why}")
    if not kafka.get("bootstrap.servers"):
        raise ConfigError("ordo-kafka: option kafka.bootstrap.servers is required (host:port,...)")
    topics = tuple(t.strip() for t in lowered.get("subscribe", "").split(",") if t.strip())
    if not topics:
        raise ConfigError("ordo-kafka: option subscribe is required: comma-separated topic names")
    return SourceOptions(
        topics=topics,
        kafka=kafka,
        starting=_starting(lowered.get("startingoffsets", "latest"), topics),
        max_records=_positive("maxRecordsPerTrigger", lowered.get("maxrecordspertrigger")),
        fail_on_data_loss=_boolean("failOnDataLoss", lowered.get("failondataloss", "true")),
        epoch_topic=lowered.get("epochtopic") or DEFAULT_EPOCH_TOPIC,
        gate=_boolean("gate", lowered.get("gate", "true")),
        poll_timeout_ms=_positive("pollTimeoutMs", lowered.get("polltimeoutms")) or 120_000,
    )


def _boolean(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"ordo-kafka: option {name} must be true or false, got {value!r}")
    return lowered == "true"


def _positive(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(f"ordo-kafka: option {name} must be a positive integer, got {value!r}")
    return number


def _starting(value: str, topics: tuple[str, ...]) -> StartingOffsets:
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        return "earliest" if text.lower() == "earliest" else "latest"
    problem = (
        f"ordo-kafka: option startingOffsets must be earliest, latest or JSON "
        f'{{"topic": {{"partition": offset}}}} (offset -2 = earliest, -1 = latest), got {value!r}'
    )
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        raise ConfigError(problem) from None
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ConfigError(problem)
    parsed: dict[str, dict[int, int]] = {}
    for topic, partitions in raw.items():
        if topic not in topics:
            raise ConfigError(
                f"ordo-kafka: option startingOffsets names {topic!r}, which is not in subscribe {topics}"
            )
        try:
            parsed[topic] = {int(p): int(o) for p, o in partitions.items()}
        except (TypeError, ValueError):
            raise ConfigError(problem) from None
        if any(p < 0 or o < EARLIEST for p, o in parsed[topic].items()):
            raise ConfigError(problem)
    return parsed
