"""Shared proxy state and the side requests the proxy itself makes to the upstream broker."""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from .client import UpstreamClient
from .coordinator import Coordinator
from .faults import FaultSet
from .records import batches
from .state import TopicRegistry
from .txn import TxnIndex

# Tansu answers a Fetch with max_wait 0 with no topics at all; 1 ms is the shortest real wait.
MIN_FETCH_WAIT_MS = 1
# Far beyond any real offset: Tansu answers such a Fetch with no data and the true high watermark
# and last stable offset (its ListOffsets "latest" is wrong, its Fetch watermarks are right).
_FAR_OFFSET = 1 << 62
# Waits of the side fetches that found nothing where the log has records: Tansu answers an
# expired wait with no topics, and on a loaded machine 1 ms can expire before it has read them.
_RETRY_WAITS_MS = (MIN_FETCH_WAIT_MS, 50, 200, 1000)
# How long offsets may be missing from Tansu's answers (a batch reserved but not stored yet) before
# they count as never coming, and readers are let past them: Tansu stores a batch milliseconds
# after reserving its offsets, so a hole that lasts this long is lost offsets, not a late batch.
HOLE_GRACE_SECONDS = 5.0

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Config:
    upstream_host: str
    upstream_port: int
    max_partitions: int = 64
    default_partitions: int = 1  # Kafka's num.partitions, used for auto-created topics
    auto_create_topics: bool = True  # Kafka's auto.create.topics.enable


@dataclass(frozen=True, slots=True)
class Watermarks:
    high: int
    stable: int


class ProxyCore:
    def __init__(
        self, config: Config, registry: TopicRegistry, faults: FaultSet, coordinator: Coordinator
    ) -> None:
        self.config = config
        self.coordinator = coordinator
        self.registry = registry
        self.faults = faults
        self.upstream = UpstreamClient(config.upstream_host, config.upstream_port)
        self.advertised: tuple[str, int] = ("127.0.0.1", 0)
        self.txn_indexes: dict[tuple[str, int], TxnIndex] = {}
        self._holes: dict[tuple[str, int, int], float] = {}  # hole's start -> first seen
        self._lost: set[tuple[str, int, int]] = set()  # holes that lasted: offsets never stored
        self._create_lock = asyncio.Lock()

    async def close(self) -> None:
        await self.upstream.close()

    async def reconcile(self) -> None:
        """Rebuild the visible counts from the broker's topics (and the state file, if any)."""
        response = await self.upstream.request(
            MetadataRequest(
                topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
            )
        )
        physical = {t.name: len(t.partitions) for t in response.topics if t.name and t.error_code == 0}
        self.registry.reconcile(physical)

    async def create_physical(self, name: str, visible: int) -> ErrorCode:
        """Create ``name`` upstream with the maximum partition count and register ``visible``."""
        async with self._create_lock:
            if self.registry.visible(name) is not None:
                return ErrorCode.none
            topic = CreatableTopic(
                name=TopicName(name),
                num_partitions=i32(self.config.max_partitions),
                replication_factor=i16(-1),
                assignments=(),
                configs=(),
            )
            response = await self.upstream.request(
                CreateTopicsRequest(
                    topics=(topic,), timeout=i32Timedelta.parse(datetime.timedelta(seconds=10))
                )
            )
            error = ErrorCode(response.topics[0].error_code)
            if error in (ErrorCode.none, ErrorCode.topic_already_exists):
                self.registry.add_if_absent(name, visible)
                return ErrorCode.none
            return error

    def lasting_holes(self, topic: str, partition: int) -> Callable[[int], bool]:
        """For :func:`records.hole_at` and :meth:`TxnIndex.feed`: whether the offsets missing
        from ``start`` on in ``topic[partition]`` have been missing for HOLE_GRACE_SECONDS."""

        def lasting(start: int) -> bool:
            key, now = (topic, partition, start), time.monotonic()
            if key in self._lost:
                return True
            first = self._holes.setdefault(key, now)
            if now - first < HOLE_GRACE_SECONDS:
                return False
            self._lost.add(key)
            _log.warning("%s[%d]: offsets from %d missing for %.0f s; readers go past them",
                         topic, partition, start, now - first)  # fmt: skip
            return True

        return lasting

    async def watermarks(
        self, partitions: Iterable[tuple[str, int]], stable: bool = True
    ) -> dict[tuple[str, int], Watermarks]:
        """True high watermark per partition, via one empty Fetch, and the last stable offset
        from the log's own transactions (:meth:`stable_offset`; with ``stable`` False, the high
        watermark again: the log is not scanned for a read_uncommitted answer)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        if not by_topic:
            return {}
        topics = tuple(
            FetchTopic(
                topic=TopicName(topic),
                partitions=tuple(
                    FetchPartition(
                        partition=i32(p), fetch_offset=i64(_FAR_OFFSET), partition_max_bytes=i32(1)
                    )
                    for p in parts
                ),
            )
            for topic, parts in by_topic.items()
        )
        result: dict[tuple[str, int], Watermarks] = {}
        for wait_ms in _RETRY_WAITS_MS:
            response = await self.upstream.request(self._fetch(topics, isolation=0, max_wait_ms=wait_ms))
            for topic_response in response.responses:
                for part in topic_response.partitions:
                    key = (topic_response.topic, int(part.partition_index))
                    if key in result:  # known from an earlier try
                        continue
                    high = int(part.high_watermark)
                    last_stable = await self.stable_offset(*key, None, high) if stable else high
                    result[key] = Watermarks(high, last_stable)
            if all((t, p) in result for t, parts in by_topic.items() for p in parts):
                break
        else:
            _log.warning("no watermarks from the broker for %s", sorted(set(partitions) - set(result)))
        return result

    async def stable_offset(self, topic: str, partition: int, blob: bytes | None, high: int) -> int:
        """The last stable offset, from the log's transactions (:class:`TxnIndex`). Tansu keeps
        one too, but it was seen stuck at a transaction long committed (its marker in the log,
        later transactions of the same producer committed after it), which holds read_committed
        readers back for good; the log itself is the truth."""
        index = await self.txn_index(topic, partition, blob, high)
        return min(index.stable_offset(), high)

    async def txn_index(self, topic: str, partition: int, blob: bytes | None, high: int) -> TxnIndex:
        """The partition's aborted-transaction index, scanned up to ``high``.

        ``blob`` (the records of the Fetch being answered) is indexed first when it continues the
        scan, so a consumer reading at the tail usually costs no extra request.
        """
        index = self.txn_indexes.get((topic, partition))
        if index is None:
            index = self.txn_indexes[(topic, partition)] = TxnIndex(name=f"{topic}[{partition}]")
        lasting = self.lasting_holes(topic, partition)
        index.feed(blob, lasting)
        waits = iter(_RETRY_WAITS_MS)
        wait_ms = next(waits)
        while index.scanned_to < high:
            part = FetchPartition(
                partition=i32(partition), fetch_offset=i64(index.scanned_to), partition_max_bytes=i32(1 << 24)
            )
            response = await self.upstream.request(
                self._fetch(
                    (FetchTopic(topic=TopicName(topic), partitions=(part,)),),
                    isolation=0,
                    max_wait_ms=wait_ms,
                )
            )
            answer = response.responses[0].partitions[0] if response.responses else None
            before = index.scanned_to
            index.feed(answer.records if answer is not None else None, lasting)
            if index.scanned_to == before:
                wait_ms = next(waits, 0)
                if not wait_ms:
                    _log.warning(
                        "scan of %s[%d] stuck at offset %d below %d: %s",
                        topic,
                        partition,
                        before,
                        high,
                        _summary(answer),
                    )
                    break
        return index

    @staticmethod
    def _fetch(topics: tuple[FetchTopic, ...], isolation: int, max_wait_ms: int) -> FetchRequest:
        return FetchRequest(
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait_ms)),
            min_bytes=i32(0),
            isolation_level=i8(isolation),
            topics=topics,
            forgotten_topics_data=(),
        )


def _summary(answer: Any) -> str:
    """What a Fetch answered for one partition, short enough to log."""
    if answer is None:
        return "no partition in the answer"
    found = list(batches(answer.records))
    first = f", first batch at {found[0].base_offset}" if found else ""
    return (
        f"error {ErrorCode(answer.error_code).name}, high watermark {int(answer.high_watermark)}, "
        f"{len(answer.records or b'')} bytes in {len(found)} batches{first}"
    )
