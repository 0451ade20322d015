"""The kind + Apache Kafka end-to-end suite runs only where a Docker engine and kind exist."""

from __future__ import annotations

import shutil
import subprocess

import pytest


def docker_unavailable_reason() -> str | None:
    """Why the e2e suite cannot run here, or None when it can."""
    if shutil.which("docker") is None:
        return "no docker client on PATH"
    if shutil.which("kind") is None:
        return "kind is not installed"
    probe = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30, check=False)
    if probe.returncode != 0:
        return "no Docker engine is running (`docker info` failed)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    e2e = [item for item in items if "tests/e2e" in str(item.fspath)]
    if not e2e:
        return
    reason = docker_unavailable_reason()
    for item in e2e:
        item.add_marker(pytest.mark.e2e)
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"e2e needs Docker and kind: {reason}"))
