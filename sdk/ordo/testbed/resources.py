"""Creating and watching ordo's resources through the Kubernetes API (tests, the sandbox)."""

from __future__ import annotations

from typing import Any

from ..api import API_GROUP
from ..api.common import VERSION
from .waiting import wait_for

__all__ = ["Expansions"]


class Expansions:
    """OrderedTopicExpansions in one namespace, through a kubernetes ``CustomObjectsApi``."""

    plural = "orderedtopicexpansions"

    def __init__(self, custom_api: Any, namespace: str) -> None:
        self.api = custom_api
        self.namespace = namespace

    def create(self, name: str, topic: str, partitions: int, **spec: Any) -> None:
        body = {
            "apiVersion": f"{API_GROUP}/{VERSION}",
            "kind": "OrderedTopicExpansion",
            "metadata": {"name": name},
            "spec": {"topic": topic, "partitions": partitions, **spec},
        }
        self.api.create_namespaced_custom_object(API_GROUP, VERSION, self.namespace, self.plural, body)

    def status(self, name: str) -> dict[str, Any]:
        obj = self.api.get_namespaced_custom_object(API_GROUP, VERSION, self.namespace, self.plural, name)
        return dict(obj.get("status") or {})

    def wait_phase(self, name: str, phase: str, timeout: float = 60.0) -> dict[str, Any]:
        """Wait until the expansion reaches ``phase``; fails at once on an unexpected final phase."""
        final = {"Completed", "Failed", "Aborted"} - {phase}

        def reached() -> dict[str, Any] | None:
            status = self.status(name)
            if status.get("phase") in final:
                raise AssertionError(f"{name} ended {status.get('phase')}: {status.get('message')}")
            return status if status.get("phase") == phase else None

        found = wait_for(reached, timeout, f"{name} to reach {phase}")
        assert found is not None
        return found
