"""Kafka's two consumer group protocols, as the SDK's consumers meet them.

``classic``: JoinGroup/SyncGroup, a client-side assignor (``partition.assignment.strategy``),
session and heartbeat set by each member. ``consumer`` (KIP-848, Kafka 4's direction): the broker
assigns (``group.remote.assignor``), owns the session and heartbeat
(``group.consumer.session.timeout.ms`` ...), and a member refuses the classic settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import ConfigError

__all__ = ["CLASSIC", "CONSUMER", "GROUP_PROTOCOLS", "group_protocol", "with_classic_defaults"]

CLASSIC, CONSUMER = "classic", "consumer"
GROUP_PROTOCOLS = (CLASSIC, CONSUMER)
CLASSIC_ONLY = ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms")


def group_protocol(config: Mapping[str, Any]) -> str:
    """The protocol a consumer made from ``config`` joins its group with."""
    protocol = str(config.get("group.protocol", CLASSIC)).lower()
    if protocol not in GROUP_PROTOCOLS:
        raise ConfigError(f"group.protocol {protocol!r}: choose one of {', '.join(GROUP_PROTOCOLS)}")
    if protocol == CONSUMER:
        refused = [key for key in CLASSIC_ONLY if key in config]
        if refused:
            raise ConfigError(
                f"{', '.join(refused)}: classic group settings; with group.protocol=consumer the "
                "broker owns them (group.consumer.* broker settings, group.remote.assignor): remove them"
            )
    return protocol


def with_classic_defaults(config: Mapping[str, Any], **defaults: Any) -> dict[str, Any]:
    """``config`` with ``defaults`` (keyword names use '_' for '.') under it for a classic member;
    a KIP-848 member gets ``config`` alone, as it refuses the classic settings."""
    if group_protocol(config) == CONSUMER:
        return dict(config)
    return {**{k.replace("_", "."): v for k, v in defaults.items()}, **config}
