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

    def on_signal(*_: object) -> None:
        # Not stop.set() here: the handler runs on the main thread, possibly while it holds the
        # Event's lock inside stop.wait(), and set() would wait for that lock for ever (a
        # producer hung so in CI). Another thread takes the lock once the main thread lets go.
        threading.Thread(target=stop.set, name="stop-on-signal", daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
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
