"""The driver's watermark query survives librdkafka's "Unknown partition" for a partition the
metadata listed (a stale cache of the topic: a driver pod died of it on the e2e cluster)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from ordo_spark.broker import BrokerView
from ordo_spark.options import parse_options
from ordo_spark.planning import Watermarks


class StaleConsumer:
    """Answers "Unknown partition" ``failures`` times, then the watermarks; counts refreshes."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.refreshed: list[str | None] = []

    def get_watermark_offsets(self, partition: Any, timeout: float, cached: bool) -> tuple[int, int]:
        if self.failures:
            self.failures -= 1
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION, "Failed to get watermark offsets"))
        return 3, 42

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        self.refreshed.append(topic)

    def close(self) -> None:
        pass


def _view(consumer: StaleConsumer, sync_timeout: float) -> BrokerView:
    options = parse_options(
        {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", "gate": "false"}, "stream"
    )
    view = BrokerView(options, sync_timeout=sync_timeout)
    view._consumer.close()
    view._consumer = consumer  # type: ignore[assignment]
    return view


def test_unknown_partition_is_asked_again_after_a_metadata_refresh() -> None:
    consumer = StaleConsumer(failures=2)
    assert _view(consumer, sync_timeout=30)._watermarks("t", 1) == Watermarks(3, 42)
    assert consumer.refreshed == ["t", "t"]


def test_it_gives_up_after_the_sync_timeout() -> None:
    with pytest.raises(KafkaException, match="Failed to get watermark offsets"):
        _view(StaleConsumer(failures=10**6), sync_timeout=0.5)._watermarks("t", 1)
