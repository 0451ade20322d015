"""The driver's view of Kafka: partition counts, watermarks and epoch histories, read so that the
histories are never older than the records below the watermarks.

Why the order matters: a record of epoch e exists only after the operator published e to the
epoch log. Reading the watermarks first, then the epoch log's end, and waiting until our reader
has applied everything up to that end (``EpochLog.read_up_to``), guarantees that every record below a
watermark has its epoch in the history we plan with; a history that lags by even a few
milliseconds would let a new epoch's records in an old partition pass as the previous epoch's,
ungated.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from ordo.epochs import EpochHistory
from ordo.epochs.log import EpochLog

from .options import SourceOptions
from .planning import Offsets, Watermarks
from .subscription import Subscription

__all__ = ["BrokerView"]

_log = logging.getLogger(__name__)
_NO_TOPIC = (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC)


class BrokerView:
    """Driver-side Kafka clients of one query; created lazily, closed by ``close``."""

    def __init__(self, options: SourceOptions, sync_timeout: float = 30.0) -> None:
        self.options = options
        self.sync_timeout = sync_timeout
        self._consumer = Consumer(options.consumer_config("driver"))
        self._epochs = EpochLog(options.client_config, options.epoch_topic) if options.gate else None

    def watermarks(self, subscription: Subscription) -> dict[str, dict[int, Watermarks]]:
        """The selected partitions' watermarks, the subscription resolved against today's topics."""
        metadata = self._consumer.list_topics(timeout=30)
        available = {
            name: len(found.partitions)
            for name, found in metadata.topics.items()
            if found.error is None and found.partitions
        }
        result: dict[str, dict[int, Watermarks]] = {}
        for topic, partitions in subscription.select(available).items():
            result[topic] = {p: self._watermarks(topic, p) for p in partitions}
        return result

    def _watermarks(self, topic: str, partition: int) -> Watermarks:
        """One partition's watermarks. librdkafka answers "Unknown partition" for a partition the
        metadata just listed when its own cache of the topic is stale (a driver pod on a real
        cluster died of it once, mid-stream): the topic's metadata is asked again and the query
        retried, for up to ``sync_timeout``."""
        deadline = time.monotonic() + self.sync_timeout
        while True:
            try:
                low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=30, cached=False
                )
                return Watermarks(low, high)
            except KafkaException as error:
                if error.args[0].code() != KafkaError._UNKNOWN_PARTITION or time.monotonic() > deadline:
                    raise
                _log.warning("ordo-kafka: %s-%d: %s; asking for the topic's metadata again", topic, partition,
                             error.args[0].str())  # fmt: skip
                self._consumer.list_topics(topic, timeout=10)
                time.sleep(0.2)  # a backoff between broker round trips, not a wait for a condition

    def offsets_for_times(self, requests: Offsets) -> Offsets:
        """Per partition, the first offset whose timestamp is at or after the requested one (ms),
        or -1 when there is none."""
        wanted = [
            TopicPartition(t, p, millis) for t, parts in requests.items() for p, millis in parts.items()
        ]
        result: Offsets = {t: {} for t in requests}
        if wanted:
            for found in self._consumer.offsets_for_times(wanted, timeout=30):
                if found.error is not None:
                    raise RuntimeError(f"ordo-kafka: {found.topic}-{found.partition}: {found.error}")
                result[found.topic][found.partition] = found.offset
        return result

    def histories(self, topics: Iterable[str]) -> dict[str, EpochHistory | None]:
        """The topics' histories, as of now (call after reading the watermarks)."""
        topics = list(topics)
        if self._epochs is None:
            return dict.fromkeys(topics)
        try:
            _, log_end = self._consumer.get_watermark_offsets(
                TopicPartition(self._epochs.topic, 0), timeout=30, cached=False
            )
        except KafkaException as error:
            if error.args[0].code() not in _NO_TOPIC:
                raise
            log_end = 0  # no epoch log: ordo never expanded anything here
        if not self._epochs.read_up_to(log_end, self.sync_timeout):
            raise RuntimeError(
                f"ordo-kafka: the epoch log {self._epochs.topic!r} (option epochTopic) could not be "
                f"read to its end within {self.sync_timeout}s"
            )
        return {topic: self._epochs.history(topic) for topic in topics}

    def snapshot(
        self, subscription: Subscription
    ) -> tuple[dict[str, dict[int, Watermarks]], dict[str, EpochHistory | None]]:
        """Watermarks, then histories at least as new as every record below them."""
        marks = self.watermarks(subscription)
        return marks, self.histories(marks)

    def close(self) -> None:
        if self._epochs is not None:
            self._epochs.close()
        self._consumer.close()
