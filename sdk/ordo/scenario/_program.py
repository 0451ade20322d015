"""What the workload programs share: a stop flag set by SIGTERM/SIGINT, and pacing."""

from __future__ import annotations

import faulthandler
import signal
import threading
import time


def stop_on_signals() -> threading.Event:
    """A stop flag set by SIGTERM/SIGINT; SIGUSR1 dumps every thread's stack to stderr."""
    faulthandler.register(signal.SIGUSR1)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


class Pacer:
    """Keeps a loop at ``rate`` iterations per second (0: as fast as possible)."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.next = time.monotonic()

    def wait(self, stop: threading.Event) -> None:
        if not self.interval:
            return
        self.next += self.interval
        delay = self.next - time.monotonic()
        if delay > 0:
            stop.wait(delay)  # pacing the workload, not synchronising with anything
