"""Fixtures of the Kubernetes testbed tests; the shared ones come from ordo_testbed.kube.fixtures."""

from __future__ import annotations

from ordo_testbed.waiting import wait_for

__all__ = ["wait_for"]
