"""Gated readers read committed records only: a producer fenced through Kafka at an expansion
leaves an aborted transaction of records placed by the old partition count, which only
read_committed readers skip. read_uncommitted is refused before any client starts."""

from __future__ import annotations

import pytest

from ordo import AsyncConsumer, ConfigError, GatedConsumer
from ordo._clients import committed_reads

# no broker listens there: a reader that got past its checks would fail differently (or hang)
CONFIG = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}


@pytest.mark.parametrize("level", ["read_uncommitted", "READ_UNCOMMITTED", "bogus"])
def test_gated_readers_refuse_anything_but_read_committed(level: str) -> None:
    config = {**CONFIG, "isolation.level": level}
    with pytest.raises(ConfigError, match=r"GatedConsumer reads committed records only.*aborted transaction"):
        GatedConsumer(config, ["t"])
    with pytest.raises(
        ConfigError, match=r"AsyncConsumer\(gate=True\) reads committed records only.*gate=False"
    ):
        AsyncConsumer(config, ["t"], gate=True)


@pytest.mark.parametrize(
    "config",
    [
        CONFIG,
        {**CONFIG, "isolation.level": "read_committed"},
        {**CONFIG, "isolation.level": "READ_COMMITTED"},
    ],
)
def test_read_committed_or_the_default_passes_the_check_and_is_set(config: dict[str, str]) -> None:
    assert committed_reads(config, "a reader", "read otherwise")["isolation.level"] == "read_committed"


def test_an_ungated_async_consumer_reads_as_the_user_says() -> None:
    consumer = AsyncConsumer({**CONFIG, "isolation.level": "read_uncommitted"}, ["t"])
    consumer.close()
