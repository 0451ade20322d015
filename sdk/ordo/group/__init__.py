"""ProducerGroup members (KIP-509): ``GroupProducer``, its rebalance events, transactions and
checkpoints."""

from .checkpoints import DEFAULT_CHECKPOINT_TOPIC, Checkpoint, CheckpointLog, ensure_checkpoint_topic
from .producer import GroupProducer, Rebalance
from .transaction import SourceTransaction

__all__ = [
    "DEFAULT_CHECKPOINT_TOPIC",
    "Checkpoint",
    "CheckpointLog",
    "GroupProducer",
    "Rebalance",
    "SourceTransaction",
    "ensure_checkpoint_topic",
]
