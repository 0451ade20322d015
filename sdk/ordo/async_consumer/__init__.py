"""AsyncConsumer (KIP-983): full-speed asynchronous processing during cooperative rebalances.

The pure parts (``offsets``, ``scheduler``, ``commits``, ``revocations``) are tested without Kafka;
``consumer`` is the thin shell over confluent-kafka. See docs/async_consumer.md.
"""

from ..topic_partition import TP
from .consumer import AsyncConsumer, Batch, Listener
from .scheduler import ORDERINGS, Ordering

__all__ = ["ORDERINGS", "TP", "AsyncConsumer", "Batch", "Listener", "Ordering"]
