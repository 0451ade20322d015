"""Fault injection for the crash-resume tests: ``ORDO_TEST_CRASH_AT=<point>`` kills the operator
at that point, with no cleanup, as a node failure would. Unset in production: a no-op."""

from __future__ import annotations

import logging
import os

__all__ = ["crash_point"]

_log = logging.getLogger(__name__)


def crash_point(name: str) -> None:
    if os.environ.get("ORDO_TEST_CRASH_AT") == name:
        _log.error("test crash point %s reached: exiting", name)
        os._exit(70)
