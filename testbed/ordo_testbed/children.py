"""Child processes of the testbed (brokers, API servers) that never outlive it."""

from __future__ import annotations

import ctypes
import signal

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn`` of a child: SIGTERM when the thread that started it dies, so a killed test
    session leaves no broker behind (Linux; the starting thread must live as long as the child)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
