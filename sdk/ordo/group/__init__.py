"""ProducerGroup members (KIP-509): ``GroupProducer``, its rebalance events, transactions and
checkpoints.

Members talk to Kubernetes (their Pod, their Lease): the Kubernetes client comes with the extra
``group`` (``pip install 'ordo-kafka[group]'``); without it, importing this package says so.
"""

from .._extras import require_extra

require_extra("kubernetes", "group", "ordo.group (GroupProducer, a ProducerGroup member)")

from .checkpoints import (  # noqa: E402
    Checkpoint,
    CheckpointLog,
    ensure_checkpoint_topic,
)
from .producer import GroupProducer, Rebalance  # noqa: E402
from .transaction import SourceTransaction  # noqa: E402

__all__ = [
    "Checkpoint",
    "CheckpointLog",
    "GroupProducer",
    "Rebalance",
    "SourceTransaction",
    "ensure_checkpoint_topic",
]
