"""The independent verifier: what reached a Kafka topic (none twice, none missing, each key in
order across expansions), read with read_committed and judged with no code of the producers or
consumers it checks; ``ordo verify`` and the sandbox's report use it."""

from .order import KeyOrder
from .topic import (
    ActiveEpoch,
    StoredRecord,
    TopicVerdict,
    check_topic,
    decode_record,
    epoch_of,
    parse_epochs,
    read_epoch_log,
    read_epochs,
    read_topic,
    source_counts,
)

__all__ = [
    "ActiveEpoch",
    "KeyOrder",
    "StoredRecord",
    "TopicVerdict",
    "check_topic",
    "decode_record",
    "epoch_of",
    "parse_epochs",
    "read_epoch_log",
    "read_epochs",
    "read_topic",
    "source_counts",
]
