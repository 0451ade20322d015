"""Bounded condition waits: the only way testbed code and tests wait for something."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_for"]

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T], timeout: float = 20.0, what: str = "condition", step: float = 0.02
) -> T:
    """Poll ``condition`` until it returns something truthy, and return that; AssertionError after
    ``timeout`` seconds naming ``what``. Not a sleep: a condition wait with a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)
