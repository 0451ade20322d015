"""Creating and watching ordo's resources through the Kubernetes API (tests, the sandbox)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ordo.api import API_GROUP
from ordo.api.common import VERSION
from ordo_testbed.waiting import wait_for

__all__ = ["Autoscalers", "Expansions", "Groups", "group_member_argv"]


class _Resources:
    """One kind of ordo's resources in one namespace, through a kubernetes ``CustomObjectsApi``."""

    kind = ""
    plural = ""

    def __init__(self, custom_api: Any, namespace: str) -> None:
        self.api = custom_api
        self.namespace = namespace

    def _create(self, name: str, spec: dict[str, Any]) -> None:
        body = {
            "apiVersion": f"{API_GROUP}/{VERSION}",
            "kind": self.kind,
            "metadata": {"name": name},
            "spec": spec,
        }
        self.api.create_namespaced_custom_object(API_GROUP, VERSION, self.namespace, self.plural, body)

    def get(self, name: str) -> dict[str, Any]:
        return dict(
            self.api.get_namespaced_custom_object(API_GROUP, VERSION, self.namespace, self.plural, name)
        )

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.get(name).get("status") or {})

    def delete(self, name: str) -> None:
        self.api.delete_namespaced_custom_object(API_GROUP, VERSION, self.namespace, self.plural, name)

    def exists(self, name: str) -> bool:
        try:
            self.get(name)
        except Exception as error:
            if getattr(error, "status", None) == 404:
                return False
            raise
        return True


class Expansions(_Resources):
    """OrderedTopicExpansions in one namespace."""

    kind, plural = "OrderedTopicExpansion", "orderedtopicexpansions"

    def create(self, name: str, topic: str, partitions: int, **spec: Any) -> None:
        self._create(name, {"topic": topic, "partitions": partitions, **spec})

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


class Autoscalers(_Resources):
    """TopicAutoscalers in one namespace."""

    kind, plural = "TopicAutoscaler", "topicautoscalers"

    def create(self, name: str, spec: dict[str, Any]) -> None:
        self._create(name, spec)


def group_member_argv(
    bootstrap: str,
    topic: str,
    *,
    records: int,
    batch: int,
    rate: float,
    epoch_topic: str,
    registry_topic: str,
    kafka_config: Path | None = None,
) -> list[str]:
    """The command of a ``ordo_sandbox.scenario.group_member`` pod (a ProducerGroup member copying a
    synthetic source: ``records`` per source partition, ``batch`` per transaction, ``rate`` per s).
    ``kafka_config``: a file of the connection's settings (``ordo_sandbox.kafka_settings``; its
    ``bootstrap.servers`` is overridden by ``bootstrap``), for a Kafka that needs more than one."""
    config = ["--kafka-config", str(kafka_config)] if kafka_config is not None else []
    return [
        sys.executable, "-m", "ordo_sandbox.scenario.group_member",
        "--bootstrap", bootstrap, "--topic", topic,
        "--records", str(records), "--batch", str(batch), "--rate", str(rate),
        "--epoch-topic", epoch_topic, "--registry-topic", registry_topic, *config,
    ]  # fmt: skip


class Groups(_Resources):
    """ProducerGroups in one namespace."""

    kind, plural = "ProducerGroup", "producergroups"

    def create(self, name: str, source_partitions: int, selector: dict[str, str], **spec: Any) -> None:
        self._create(
            name, {"sourcePartitions": source_partitions, "selector": {"matchLabels": selector}, **spec}
        )

    def patch_spec(self, name: str, **spec: Any) -> None:
        self.api.patch_namespaced_custom_object(
            API_GROUP, VERSION, self.namespace, self.plural, name, {"spec": spec}
        )

    def checkpoints(self, name: str) -> dict[int, str | None]:
        """Source partition -> the checkpoint status mirrors for it (None: none yet)."""
        return {c["partition"]: c.get("checkpoint") for c in self.status(name).get("checkpoints") or []}

    def owners(self, name: str) -> dict[str, list[int]]:
        """Live member -> the partitions status says it owns."""
        return {m["pod"]: m.get("partitions", []) for m in self.status(name).get("members") or []}

    def wait_settled(
        self, name: str, members: int, timeout: float = 60.0, partitions: int | None = None
    ) -> dict[str, Any]:
        """Wait until ``members`` live members own every partition and the group is Ready."""

        def settled() -> dict[str, Any] | None:
            status = self.status(name)
            ready = any(
                c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
            )
            owned = sum(len(m.get("partitions", [])) for m in status.get("members") or [])
            if ready and status.get("memberCount") == members and (partitions is None or owned == partitions):
                return status
            return None

        found = wait_for(settled, timeout, f"group {name} settled with {members} member(s)")
        assert found is not None
        return found
