"""ordo's control topics: their default names and record size, the one place every side reads them.

The operator creates the epoch log and the producer registry, the first group member the
checkpoint topic; producers, consumers, Spark and the tools read them by these names unless told
others.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_CHECKPOINT_TOPIC",
    "DEFAULT_EPOCH_TOPIC",
    "DEFAULT_REGISTRY_TOPIC",
    "MAX_CONTROL_RECORD_BYTES",
]

DEFAULT_EPOCH_TOPIC = "__ordo_epochs"
"""The epoch log: each topic's history of partition counts and thresholds (the operator writes it)."""
DEFAULT_REGISTRY_TOPIC = "__ordo_producers"
"""The producer registry: each ordo producer's liveness and fence acknowledgements."""
DEFAULT_CHECKPOINT_TOPIC = "__ordo_checkpoints"
"""ProducerGroup checkpoints, one record per source partition (``member_wire.checkpoint_key``)."""
MAX_CONTROL_RECORD_BYTES = 8 * 1024 * 1024
"""The largest record of these topics (their ``max.message.bytes``, set when ordo creates them):
a topic's epoch history keeps a threshold per old partition of every expansion (100 expansions
up to 2,000 partitions: 1.7 MB of JSON), over Kafka's 1 MB default."""
