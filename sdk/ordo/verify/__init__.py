"""The independent verifier: what reached a Kafka topic (none twice, none missing, each key in
order across expansions), read with read_committed and judged with no code of the producers or
consumers it checks; ``ordo verify`` and the sandbox's report use it. Where each record's key
and per-key number are is the caller's to say (:mod:`ordo.verify.records`)."""

from .order import KeyOrder
from .records import AnyOf, JsonFields, KafkaKey, RawRecord, RecordLayout, why_unreadable
from .topic import (
    ActiveEpoch,
    ReadProgress,
    StoredRecord,
    TopicRecords,
    TopicVerdict,
    check_topic,
    epoch_of,
    parse_epochs,
    read_epoch_log,
    read_epochs,
    read_topic,
)

__all__ = [
    "ActiveEpoch",
    "AnyOf",
    "JsonFields",
    "KafkaKey",
    "KeyOrder",
    "RawRecord",
    "ReadProgress",
    "RecordLayout",
    "StoredRecord",
    "TopicRecords",
    "TopicVerdict",
    "check_topic",
    "epoch_of",
    "parse_epochs",
    "read_epoch_log",
    "read_epochs",
    "read_topic",
    "why_unreadable",
]
