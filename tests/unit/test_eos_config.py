"""``ordo bench eos``'s client configs: properties files, key=value props, what the benchmark owns."""

from __future__ import annotations

import pytest

from ordo_testbed.bench.eos_config import EosConfigError, eos_configs


def test_each_side_gets_its_settings_and_the_benchmark_its_own() -> None:
    configs = eos_configs(
        None,
        {"bootstrap.servers": "k:9093", "security.protocol": "SSL", "transactional.id": "old"},
        {"bootstrap.servers": "k:9093", "fetch.min.bytes": "1"},
        "bench",
        "tx-1",
    )
    assert configs.bootstrap == "k:9093"
    assert configs.producer["transactional.id"] == "tx-1" and configs.producer["security.protocol"] == "SSL"
    assert "transactional.id" not in configs.plain_producer
    assert configs.consumer == {
        "bootstrap.servers": "k:9093",
        "fetch.min.bytes": "1",
        "group.id": "bench",
        "enable.auto.commit": "false",
        "isolation.level": "read_committed",
    }
    # --bootstrap is the default of both sides
    assert eos_configs("b:9092", {}, {}, "g", "t").consumer["bootstrap.servers"] == "b:9092"


@pytest.mark.parametrize(
    ("producer", "consumer", "message"),
    [
        ({}, {"bootstrap.servers": "k:1"}, "no Kafka for the producer"),
        ({"bootstrap.servers": "k:1"}, {"enable.auto.commit": "true"}, "enable.auto.commit=true"),
        ({"bootstrap.servers": "k:1"}, {"isolation.level": "read_uncommitted"}, "needs read_committed"),
        ({"bootstrap.servers": "k:1"}, {"group.id": "other"}, "--consumer-group-id"),
        ({"bootstrap.servers": "k:1", "enable.idempotence": "false"}, {}, "transactions need it"),
    ],
)
def test_settings_the_benchmark_cannot_use_are_refused(
    producer: dict[str, str], consumer: dict[str, str], message: str
) -> None:
    with pytest.raises(EosConfigError, match=message):
        eos_configs(None if "bootstrap.servers" not in producer else "k:1", producer, consumer, "g", "t")
