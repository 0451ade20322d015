"""Which settings a consumer gets per group protocol, and the error for classic settings in a
KIP-848 member."""

from __future__ import annotations

import pytest

from ordo.errors import ConfigError
from ordo.kafka_group_protocol import group_protocol, with_classic_defaults


def test_classic_members_get_the_defaults_under_their_own_settings() -> None:
    config = {"group.id": "g", "session.timeout.ms": 9000}
    merged = with_classic_defaults(config, session_timeout_ms=6000, partition_assignment_strategy="range")
    assert merged == {"group.id": "g", "session.timeout.ms": 9000, "partition.assignment.strategy": "range"}


def test_a_kip_848_member_gets_none_of_them() -> None:
    config = {"group.id": "g", "group.protocol": "CONSUMER"}
    assert with_classic_defaults(config, session_timeout_ms=6000) == config
    assert group_protocol(config) == "consumer"


def test_classic_settings_in_a_kip_848_member_are_named() -> None:
    config = {"group.protocol": "consumer", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    with pytest.raises(ConfigError, match=r"session.timeout.ms, heartbeat.interval.ms: .*broker owns"):
        group_protocol(config)


def test_an_unknown_protocol_is_refused() -> None:
    with pytest.raises(ConfigError, match="choose one of classic, consumer"):
        group_protocol({"group.protocol": "share"})
