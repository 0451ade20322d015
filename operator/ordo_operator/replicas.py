"""This process among the operator's replicas: whether kopf lets it work (``plans.replicas``).

Read from kopf's own peering objects (a ClusterKopfPeering, or a KopfPeering in each served
namespace) whenever asked: the chart grants list on them wherever it runs replicas with peering.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes.client import CustomObjectsApi

from .kube import api_client
from .plans.replicas import is_active, peers_of

__all__ = ["Replica"]

PEERING_GROUP, PEERING_VERSION = "kopf.dev", "v1"
_log = logging.getLogger(__name__)


class Replica:
    """``peering``: the peering object's name (None: standalone, always working); ``identity`` and
    ``priority``: this replica's, as kopf announces them (``POD_ID``, ``--priority``)."""

    def __init__(self, peering: str | None, identity: str, priority: int, namespaces: Sequence[str]) -> None:
        self.peering, self.identity, self.priority = peering, identity, priority
        self.namespaces = list(namespaces)
        self._said: bool | None = None

    def working(self) -> bool:
        """Whether no live peer outranks this replica in any of its peering objects; False when
        one cannot be read (kopf pauses without its peering object too)."""
        if self.peering is None:
            return True
        try:
            statuses = self._statuses()
        except Exception as error:  # the API server away: judged again at the next turn
            _log.warning("peering %s not read: %s", self.peering, error)
            return False
        now = datetime.now(UTC)
        working = bool(statuses) and all(
            is_active(peers_of(status, now), self.identity, self.priority, now) for status in statuses
        )
        if working != self._said:
            _log.info("replica %s %s", self.identity, "works" if working else "stands by (kopf peering)")
            self._said = working
        return working

    def _statuses(self) -> list[dict[str, Any]]:
        api = CustomObjectsApi(api_client())
        selector = f"metadata.name={self.peering}"
        if not self.namespaces:
            listed = cast(
                dict[str, Any],
                api.list_cluster_custom_object(
                    PEERING_GROUP, PEERING_VERSION, "clusterkopfpeerings", field_selector=selector
                ),
            )
            found = listed["items"]
            return [item.get("status") or {} for item in found] if found else []
        statuses = []
        for namespace in self.namespaces:
            listed = cast(
                dict[str, Any],
                api.list_namespaced_custom_object(
                    PEERING_GROUP, PEERING_VERSION, namespace, "kopfpeerings", field_selector=selector
                ),
            )
            found = listed["items"]
            if not found:
                return []
            statuses.append(found[0].get("status") or {})
        return statuses
