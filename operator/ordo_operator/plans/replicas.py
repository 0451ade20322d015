"""Which operator replica works (kopf peering), judged from the peering object, pure.

kopf pauses a replica's handlers while a live peer has a higher priority (or the same: it then
pauses both), but not the operator's own threads. The topic watch is one: it writes the epoch log
(epoch 0 of new topics, orphan fences aborted) and says when partitions exist that no epoch
covers, which only the replica driving the expansions can judge. So it works only while kopf's
rule, applied to the same peering object, says this replica works.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

__all__ = ["PeerView", "is_active", "peers_of"]

_KOPF_LIFETIME = 60  # seconds: kopf's default, and what it assumes for a peer that gives none


@dataclass(frozen=True)
class PeerView:
    identity: str
    priority: int
    deadline: datetime | None
    """When it counts as dead unless it renews (its last keepalive + lifetime); None: just seen."""


def peers_of(status: Mapping[str, Any], now: datetime) -> list[PeerView]:
    """The peers a kopf peering object's ``status`` lists (identity -> priority, lastseen,
    lifetime), read as kopf reads them: a peer without ``lastseen`` is alive now."""
    peers = []
    for identity, info in status.items():
        if not isinstance(info, Mapping):
            continue
        lastseen = info.get("lastseen")
        seen = datetime.fromisoformat(str(lastseen)) if lastseen else now
        lifetime = int(info.get("lifetime", _KOPF_LIFETIME))
        deadline = seen + timedelta(seconds=lifetime)
        peers.append(PeerView(str(identity), int(info.get("priority", 0)), deadline))
    return peers


def is_active(peers: list[PeerView], me: str, priority: int, now: datetime) -> bool:
    """Whether kopf lets this replica work: no other live peer has its priority or a higher one."""
    return not any(
        peer.identity != me and peer.priority >= priority and (peer.deadline is None or peer.deadline > now)
        for peer in peers
    )
