"""Runs where Docker and kind exist: the tools the e2e suite drives answer."""

import subprocess


def test_kind_and_docker_answer() -> None:
    assert subprocess.run(["kind", "version"], capture_output=True, check=False).returncode == 0
    assert subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0
