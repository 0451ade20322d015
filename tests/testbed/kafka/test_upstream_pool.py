"""The proxy's own upstream connections, against Tansu itself."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from ordo.testbed.kafka.client import UpstreamPool
from ordo.testbed.kafka.fixtures import KafkaHandle

pytestmark = pytest.mark.testbed


def _waiting_fetch(topic: str, seconds: float) -> FetchRequest:
    """A Fetch past the end of an empty partition: Tansu holds it for ``seconds``."""
    partition = FetchPartition(partition=i32(0), fetch_offset=i64(0), partition_max_bytes=i32(1 << 20))
    return FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(seconds=seconds)),
        min_bytes=i32(1),
        isolation_level=i8(0),
        topics=(FetchTopic(topic=TopicName(topic), partitions=(partition,)),),
        forgotten_topics_data=(),
    )


def test_a_request_waiting_at_tansu_does_not_hold_the_next_one(kafka: KafkaHandle) -> None:
    """Tansu answers one connection's requests in order: a fetch the proxy asks again with a wait
    must not hold other clients' fetches behind it."""
    kafka.require_faults()
    assert kafka.testbed is not None
    topic = kafka.create_topic(1)
    broker = kafka.testbed.broker
    metadata = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )

    async def both() -> tuple[bool, int]:
        pool = UpstreamPool(broker.host, broker.port)
        try:
            waiting = asyncio.ensure_future(pool.request(_waiting_fetch(topic, 5.0)))
            await asyncio.sleep(0)  # the fetch is sent first
            await pool.request(metadata)
            answered_first = not waiting.done()
            await waiting
            return answered_first, pool.size
        finally:
            await pool.close()

    answered_first, connections = asyncio.run(both())
    assert answered_first, "the second request waited for the fetch before it"
    assert connections == 2
