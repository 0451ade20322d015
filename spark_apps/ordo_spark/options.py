"""The ``ordo-kafka`` source's options, parsed once on the driver into a frozen value.

Names and meanings are Spark's Kafka source's (structured-streaming-kafka-integration) wherever
the ordering gate allows; ``epochTopic``, ``gate``, ``maxTasks`` and ``misplacedRecords`` are
ordo's own. An option Spark has but
ordo cannot honour is refused with the reason and what to use instead; an unknown option is
refused naming the closest known one, so a typo is never silently ignored.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ordo.control_topics import DEFAULT_EPOCH_TOPIC
from ordo.errors import ConfigError

from .subscription import Subscription

__all__ = [
    "EARLIEST",
    "LATEST",
    "EndingOffsets",
    "MisplacedRecords",
    "Mode",
    "SourceOptions",
    "StartingOffsets",
    "StartingTimes",
    "include_headers",
    "parse_options",
]

EARLIEST = -2  # Spark's Kafka source spells these -2 and -1 in offsets JSON
LATEST = -1

Mode = Literal["stream", "batch"]
MisplacedRecords = Literal["fail", "deliver"]
"""misplacedRecords: what a task does with a record placed by an old partition count after its
partition's threshold (``ordo.epochs.placement``)."""
StartingOffsets = Literal["earliest", "latest"] | dict[str, dict[int, int]]
EndingOffsets = Literal["latest"] | dict[str, dict[int, int]]
StartingTimes = int | dict[str, dict[int, int]]
"""A timestamp (ms) for every partition, or per partition; resolved to offsets by the broker."""

_BOTH: tuple[Mode, ...] = ("stream", "batch")
_STREAM: tuple[Mode, ...] = ("stream",)
_BATCH: tuple[Mode, ...] = ("batch",)
# Accepted options: lower-cased name -> (Spark's spelling, the modes that take it).
_ACCEPTED: dict[str, tuple[str, tuple[Mode, ...]]] = {
    name.lower(): (name, modes)
    for name, modes in [
        ("kafka.bootstrap.servers", _BOTH),
        ("subscribe", _BOTH),
        ("subscribePattern", _BOTH),
        ("assign", _BOTH),
        ("startingOffsets", _BOTH),
        ("startingTimestamp", _BOTH),
        ("startingOffsetsByTimestamp", _BOTH),
        ("startingOffsetsByTimestampStrategy", _BOTH),
        ("endingOffsets", _BATCH),
        ("endingTimestamp", _BATCH),
        ("endingOffsetsByTimestamp", _BATCH),
        ("maxOffsetsPerTrigger", _STREAM),
        ("maxRecordsPerTrigger", _STREAM),  # ordo's name before it took Spark's; kept as an alias
        ("minOffsetsPerTrigger", _STREAM),
        ("maxTriggerDelay", _STREAM),
        ("failOnDataLoss", _BOTH),
        ("includeHeaders", _BOTH),
        ("groupIdPrefix", _BOTH),
        ("kafkaConsumer.pollTimeoutMs", _BOTH),
        ("pollTimeoutMs", _BOTH),  # ordo's name before it took Spark's; kept as an alias
        ("epochTopic", _BOTH),
        ("gate", _BOTH),
        ("maxTasks", _BOTH),
        ("misplacedRecords", _BOTH),
    ]
}
_WRONG_MODE = {
    "stream": "is for batch queries (spark.read): a stream has no end; to stop at what is there "
    "now, start the stream with .trigger(availableNow=True)",
    "batch": "limits the micro-batches of a stream (spark.readStream); a batch read reads its whole "
    "range at once",
}
# Spark's options that ordo refuses, and why.
_SPLITS = (
    "ordo reads a Kafka partition's range in one task, never split: parallel pieces of one "
    "partition would let a key's records overtake each other"
)
_REFUSED = {
    "minpartitions": ("minPartitions", _SPLITS),
    "maxrecordsperpartition": ("maxRecordsPerPartition", _SPLITS),
    "fetchoffset.numretries": (
        "fetchOffset.numRetries",
        "ordo's driver reads offsets with librdkafka, which retries by itself (tune kafka.retry.backoff.ms)",
    ),
    "fetchoffset.retryintervalms": (
        "fetchOffset.retryIntervalMs",
        "ordo's driver reads offsets with librdkafka, which retries by itself (tune kafka.retry.backoff.ms)",
    ),
}
# Client settings the source manages itself: a user value would break offsets or gates.
_MANAGED = {
    "enable.auto.commit": "the source tracks offsets in Spark's checkpoint, never in Kafka",
    "auto.offset.reset": "use startingOffsets and failOnDataLoss instead",
    "enable.partition.eof": "the source needs partition-end events to finish a task",
    "key.deserializer": "keys are always binary: deserialize with DataFrame operations (CAST, from_json)",
    "value.deserializer": "values are always binary: deserialize with DataFrame operations (CAST, from_json)",
    "interceptor.classes": "the source reads with librdkafka, which has no interceptors",
}
# Fetch settings for reading whole offset ranges (Spark's tasks read many records at once).
_FETCH_DEFAULTS = {
    "fetch.max.bytes": "104857600",
    "max.partition.fetch.bytes": "16777216",
    "queued.min.messages": "200000",
    "fetch.wait.max.ms": "50",
}
# Spark tasks a batch runs at most: each costs PySpark about 0.1-0.4 s whatever it reads, so 1,024
# partitions in a task each took a micro-batch of 50k records from 4 s (8 partitions) to 91 s.
# About 2-4 tasks per core is best (local[2], 1,024 partitions: 8 tasks 3.1 s, 64 tasks 7.4 s).
DEFAULT_MAX_TASKS = 16
READ_COMMITTED = "read_committed"
"""The gated source's isolation.level: a fenced producer's aborted records stay unread."""
_DELAY = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$")
_DELAY_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True)
class SourceOptions:
    """Everything the source needs; picklable (it travels to executors with the reader)."""

    subscription: Subscription
    kafka: Mapping[str, str]
    starting: StartingOffsets = "latest"
    starting_times: StartingTimes | None = None
    starting_times_strategy: Literal["error", "latest"] = "error"
    ending: EndingOffsets = "latest"
    ending_times: StartingTimes | None = None
    max_records: int | None = None
    min_records: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    fail_on_data_loss: bool = True
    include_headers: bool = True
    group_id_prefix: str = "ordo-spark"
    epoch_topic: str = DEFAULT_EPOCH_TOPIC
    gate: bool = True
    poll_timeout_ms: int = 120_000
    max_tasks: int = DEFAULT_MAX_TASKS
    misplaced_records: MisplacedRecords = "fail"
    fetch: Mapping[str, str] = field(default_factory=lambda: dict(_FETCH_DEFAULTS))

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics named in subscribe or assign (empty for subscribePattern)."""
        return self.subscription.named_topics

    def consumer_config(self, purpose: str) -> dict[str, Any]:
        """A librdkafka consumer config: fetch defaults, the user's ``kafka.*``, then ours.
        The source assigns partitions itself and commits nothing, so the group id only names
        the client to the broker (``kafka.group.id`` replaces it)."""
        config: dict[str, Any] = {**self.fetch, "group.id": f"{self.group_id_prefix}-{purpose}"}
        config.update(self.kafka)
        config.update(
            {"enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "error"}
        )
        if self.gate:  # parse_options refused anything else
            config["isolation.level"] = READ_COMMITTED
        return config

    @property
    def client_config(self) -> dict[str, str]:
        """The user's ``kafka.*`` options alone (for the epoch log reader)."""
        return dict(self.kafka)


def parse_options(options: Mapping[str, str], mode: Mode = "stream") -> SourceOptions:
    """Parse Spark's (case-insensitive, all-string) options for a stream or a batch read;
    ConfigError names the bad option and says what to use."""
    lowered = {k.lower(): v for k, v in options.items()}
    _refuse_unknown({k.lower(): k for k in options}, mode)
    kafka = {k[len("kafka.") :]: v for k, v in lowered.items() if k.startswith("kafka.")}
    for name, why in _MANAGED.items():
        if name in kafka:
            raise ConfigError(f"ordo-kafka: option kafka.{name} is not supported: {why}")
    if not kafka.get("bootstrap.servers"):
        raise ConfigError("ordo-kafka: option kafka.bootstrap.servers is required (host:port,...)")
    max_records = _records_per_trigger(lowered)
    min_records = _positive("minOffsetsPerTrigger", lowered.get("minoffsetspertrigger"))
    if max_records is not None and min_records is not None and min_records > max_records:
        raise ConfigError(
            f"ordo-kafka: option minOffsetsPerTrigger ({min_records}) is more than "
            f"maxOffsetsPerTrigger ({max_records}): no batch could satisfy both"
        )
    gate = _boolean("gate", lowered.get("gate", "true"))
    if gate:
        _committed_only(kafka)
    subscription = Subscription.parse(lowered, gate=gate)
    misplaced = _misplaced(lowered.get("misplacedrecords"), gate)
    return SourceOptions(
        subscription=subscription,
        kafka=kafka,
        starting=_starting(lowered.get("startingoffsets"), subscription, mode),
        starting_times=_times("startingTimestamp", "startingOffsetsByTimestamp", lowered, subscription),
        starting_times_strategy=_strategy(lowered.get("startingoffsetsbytimestampstrategy", "error")),
        ending=_ending(lowered.get("endingoffsets"), subscription),
        ending_times=_times("endingTimestamp", "endingOffsetsByTimestamp", lowered, subscription),
        max_records=max_records,
        min_records=min_records,
        max_trigger_delay_ms=_delay(lowered.get("maxtriggerdelay", "15m")),
        fail_on_data_loss=_boolean("failOnDataLoss", lowered.get("failondataloss", "true")),
        include_headers=_boolean("includeHeaders", lowered.get("includeheaders", "true")),
        group_id_prefix=lowered.get("groupidprefix") or "ordo-spark",
        epoch_topic=lowered.get("epochtopic") or DEFAULT_EPOCH_TOPIC,
        gate=gate,
        poll_timeout_ms=_poll_timeout(lowered),
        max_tasks=_positive("maxTasks", lowered.get("maxtasks")) or DEFAULT_MAX_TASKS,
        misplaced_records=misplaced,
    )


def include_headers(options: Mapping[str, str]) -> bool:
    """Whether the schema has the ``headers`` column (read before the mode is known)."""
    value = next((v for k, v in options.items() if k.lower() == "includeheaders"), "true")
    return _boolean("includeHeaders", value)


def _refuse_unknown(spelled_as: Mapping[str, str], mode: Mode) -> None:
    """``spelled_as``: each option's lower-cased name -> the user's spelling."""
    for name in sorted(spelled_as):
        if name.startswith("kafka."):
            continue
        if name in _REFUSED:
            spelled, why = _REFUSED[name]
            raise ConfigError(f"ordo-kafka: option {spelled} is not supported: {why}")
        accepted = _ACCEPTED.get(name)
        if accepted is None:
            raise ConfigError(f"ordo-kafka: unknown option {spelled_as[name]!r}{_did_you_mean(name, mode)}")
        spelled, modes = accepted
        if mode not in modes:
            raise ConfigError(f"ordo-kafka: option {spelled} {_WRONG_MODE[mode]}")


def _did_you_mean(name: str, mode: Mode) -> str:
    if name in ("topic", "topics"):  # the Kafka sink's option; the source subscribes
        return ": did you mean subscribe?"
    candidates = {low: spelled for low, (spelled, modes) in _ACCEPTED.items() if mode in modes}
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    if close:
        return f": did you mean {candidates[close[0]]}?"
    if "." in name:  # a client setting without its prefix
        return f": client settings take the prefix kafka. (did you mean kafka.{name}?)"
    known = ", ".join(sorted(candidates.values(), key=str.lower))
    return f"; known options: {known}, and kafka.* client settings"


def _records_per_trigger(lowered: Mapping[str, str]) -> int | None:
    if "maxoffsetspertrigger" in lowered and "maxrecordspertrigger" in lowered:
        raise ConfigError(
            "ordo-kafka: options maxOffsetsPerTrigger and maxRecordsPerTrigger are the same limit "
            "(maxRecordsPerTrigger is its old name): set only maxOffsetsPerTrigger"
        )
    if "maxrecordspertrigger" in lowered:
        return _positive("maxRecordsPerTrigger", lowered["maxrecordspertrigger"])
    return _positive("maxOffsetsPerTrigger", lowered.get("maxoffsetspertrigger"))


def _poll_timeout(lowered: Mapping[str, str]) -> int:
    if "kafkaconsumer.polltimeoutms" in lowered and "polltimeoutms" in lowered:
        raise ConfigError(
            "ordo-kafka: options kafkaConsumer.pollTimeoutMs and pollTimeoutMs are the same setting "
            "(pollTimeoutMs is its old name): set only kafkaConsumer.pollTimeoutMs"
        )
    if "polltimeoutms" in lowered:
        return _positive("pollTimeoutMs", lowered["polltimeoutms"]) or 120_000
    return _positive("kafkaConsumer.pollTimeoutMs", lowered.get("kafkaconsumer.polltimeoutms")) or 120_000


def _committed_only(kafka: Mapping[str, str]) -> None:
    level = kafka.get("isolation.level")
    if level is not None and level.lower() != READ_COMMITTED:
        raise ConfigError(
            f"ordo-kafka: option kafka.isolation.level={level} is not supported with gate=true: the "
            "gated source reads committed records only, as a producer fenced at an expansion leaves "
            "an aborted transaction of records placed by the old partition count; remove the option "
            "(read_committed is the default), or set gate=false to read without the ordering gate"
        )


def _boolean(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"ordo-kafka: option {name} must be true or false, got {value!r}")
    return lowered == "true"


def _integer(name: str, value: str, minimum: int, what: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise ConfigError(f"ordo-kafka: option {name} must be {what}, got {value!r}")
    return number


def _positive(name: str, value: str | None) -> int | None:
    return None if value is None else _integer(name, value, 1, "a positive integer")


def _misplaced(value: str | None, gate: bool) -> MisplacedRecords:
    """misplacedRecords: fail (the default, as failOnDataLoss) or deliver; judged only through
    the epoch log, so only with the gate."""
    if value is None:
        return "fail"
    if not gate:
        raise ConfigError(
            "ordo-kafka: option misplacedRecords needs gate=true: without the epoch log no record is "
            "judged misplaced; remove it, or set gate=true"
        )
    lowered = value.strip().lower()
    if lowered == "fail":
        return "fail"
    if lowered == "deliver":
        return "deliver"
    raise ConfigError(
        f"ordo-kafka: option misplacedRecords must be fail (a task fails at a record placed by an old "
        f"partition count after its threshold) or deliver (reads it as it is: topics whose keyed "
        f"records are not placed by murmur2), got {value!r}"
    )


def _delay(value: str) -> int:
    """A duration like Spark's maxTriggerDelay: ``15m``, ``30s``, ``500ms`` (no unit: ms)."""
    match = _DELAY.match(value.lower())
    if match is None:
        raise ConfigError(
            f"ordo-kafka: option maxTriggerDelay must be a duration like 15m, 30s or 500ms, got {value!r}"
        )
    return int(match.group(1)) * _DELAY_MS[match.group(2) or "ms"]


def _strategy(value: str) -> Literal["error", "latest"]:
    lowered = value.strip().lower()
    if lowered == "error":
        return "error"
    if lowered == "latest":
        return "latest"
    raise ConfigError(
        f"ordo-kafka: option startingOffsetsByTimestampStrategy must be error or latest, got {value!r}"
    )


def _starting(value: str | None, subscription: Subscription, mode: Mode) -> StartingOffsets:
    """startingOffsets: earliest, latest (streams only, as in Spark) or JSON per partition."""
    if value is None:
        return "latest" if mode == "stream" else "earliest"
    word = value.strip().lower()
    if word == "earliest":
        return "earliest"
    if word == "latest":
        if mode == "batch":
            raise ConfigError(
                "ordo-kafka: option startingOffsets cannot be latest in a batch read (spark.read): "
                "it would read nothing; use earliest or JSON offsets"
            )
        return "latest"
    problem = (
        "ordo-kafka: option startingOffsets must be earliest, latest or JSON "
        f'{{"topic": {{"partition": offset}}}} (offset -2 = earliest, -1 = latest), got {value!r}'
    )
    return _per_partition("startingOffsets", value, subscription, EARLIEST, problem)


def _ending(value: str | None, subscription: Subscription) -> EndingOffsets:
    """endingOffsets (batch reads): latest or JSON per partition, -1 meaning latest."""
    if value is None or value.strip().lower() == "latest":
        return "latest"
    problem = (
        "ordo-kafka: option endingOffsets must be latest or JSON "
        f'{{"topic": {{"partition": offset}}}} (offset -1 = latest), got {value!r}'
    )
    if value.strip().lower() == "earliest":
        raise ConfigError(f"{problem}: a read that ends at earliest reads nothing")
    return _per_partition("endingOffsets", value, subscription, LATEST, problem)


def _per_partition(
    name: str, text: str, subscription: Subscription, lowest: int, problem: str
) -> dict[str, dict[int, int]]:
    try:
        raw = json.loads(text.strip())
    except json.JSONDecodeError:
        raise ConfigError(problem) from None
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ConfigError(problem)
    parsed: dict[str, dict[int, int]] = {}
    for topic, partitions in raw.items():
        subscription.check_named(name, topic)
        try:
            parsed[topic] = {int(p): int(o) for p, o in partitions.items()}
        except (TypeError, ValueError):
            raise ConfigError(problem) from None
        if any(p < 0 or o < lowest for p, o in parsed[topic].items()):
            raise ConfigError(problem)
    return parsed


def _times(
    single: str, per_partition: str, lowered: Mapping[str, str], subscription: Subscription
) -> StartingTimes | None:
    """startingTimestamp (every partition) wins over startingOffsetsByTimestamp, as in Spark."""
    value = lowered.get(single.lower())
    if value is not None:
        return _integer(single, value.strip(), 0, "a timestamp in milliseconds since the epoch")
    text = lowered.get(per_partition.lower())
    if text is None:
        return None
    problem = (
        f"ordo-kafka: option {per_partition} must be JSON "
        f'{{"topic": {{"partition": timestamp in ms}}}}, got {text!r}'
    )
    return _per_partition(per_partition, text, subscription, 0, problem)
