"""The key ordo's maps use for a topic's partition."""

from __future__ import annotations

__all__ = ["TP"]

TP = tuple[str, int]
"""(topic, partition): hashable and cheap, where confluent_kafka's TopicPartition is neither."""
