"""Processes whose clocks do not count a pause, as a paused virtual machine's do not.

A KVM/QEMU guest that is paused (live migration, ``virsh suspend``, a host under maintenance)
counts the pause neither on CLOCK_MONOTONIC nor, until NTP steps it, on CLOCK_REALTIME: on
resume its timers, leases and librdkafka's delivery timeouts go on as if no time had passed. Here
a process gets the same clocks from a small preloaded library of ours (``frozen_clock.c``, compiled
once per machine into the cache): every clock it reads is behind the kernel's by the nanoseconds in
the first 8 bytes of a control file it maps shared, and every wait with an absolute deadline is
moved by as much. :meth:`FrozenClock.resume` adds the length of the SIGSTOP to those bytes before
SIGCONT, so every clock the process reads after waking goes on from where it stopped.

Why not libfaketime (Debian's 0.9.10, used first): it re-reads its offset from a file after a
cache period and applies it without a lock, so on waking a thread could read the clock by the old
offset while another re-read the file. Under load that failed a queued record at once instead of
3 s later, or set librdkafka's main thread spinning for a second (a deadline computed by one offset,
converted by the other), about one wake-up in ten; and it left three waits unconverted
(``sem_clockwait``, C11 ``cnd_timedwait``, ``pthread_cond_clockwait``). Here the offset changes only
while the process is stopped, and a thread stopped between reading the kernel's clock and
subtracting the offset reads again (the library compares the offset before and after).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Protocol

from ordo_testbed.cache import cache_root
from ordo_testbed.waiting import wait_for

__all__ = ["FrozenClock", "FrozenClockUnavailable", "process_state", "shim"]

CONTROL_ENV = "ORDO_FROZEN_CLOCK"
"""The control file's path, for the preloaded library."""


class FrozenClockUnavailable(RuntimeError):
    """No C compiler to build the preloaded library: what to install is in the message."""


class _Process(Protocol):
    pid: int

    def send_signal(self, sig: int) -> None: ...


def shim() -> Path:
    """The compiled ``frozen_clock.c``, built once per machine and source into the cache."""
    source_text = resources.files("ordo_testbed").joinpath("frozen_clock.c").read_text()
    digest = hashlib.sha256(source_text.encode()).hexdigest()[:16]
    built = cache_root() / "frozen-clock" / f"frozen-clock-{digest}.so"
    if built.is_file():
        return built
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise FrozenClockUnavailable("no C compiler (cc): scripts/system-deps installs gcc")
    built.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=built.parent) as work:
        source, output = Path(work) / "frozen_clock.c", Path(work) / "frozen_clock.so"
        source.write_text(source_text)
        done = subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(output), str(source), "-ldl"],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise FrozenClockUnavailable(f"compiling the frozen clock failed:\n{done.stderr}")
        os.replace(output, built)  # whole or not at all, if two sessions build it at once
    return built


def process_state(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` ("T": stopped), "" once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return ""
    return stat[stat.rindex(")") + 2]


class FrozenClock:
    """The clocks of one process (started with :meth:`environment`): :meth:`stop` it, then
    :meth:`resume` it with the pause hidden from its clocks, or counted (the control)."""

    def __init__(self, directory: Path, name: str = "clock") -> None:
        self.control = directory / f"{name}.frozen-clock"
        self.hidden = 0.0  # seconds of pauses the process's clocks did not count
        self._stopped_at: float | None = None
        self._preload = str(shim())  # unavailable: said before any process starts
        self._write(0.0)

    def environment(self) -> dict[str, str]:
        """What the process's environment needs (``LD_PRELOAD`` and the control file)."""
        return {"LD_PRELOAD": self._preload, CONTROL_ENV: str(self.control)}

    def stop(self, process: _Process, timeout: float = 10.0) -> None:
        """SIGSTOP, and wait until the kernel says it is stopped."""
        process.send_signal(signal.SIGSTOP)
        wait_for(lambda: process_state(process.pid) in ("T", ""), timeout, f"process {process.pid} to stop")
        self._stopped_at = time.monotonic()

    def stopped_for(self) -> float:
        """Seconds since :meth:`stop` (0 when running)."""
        return 0.0 if self._stopped_at is None else time.monotonic() - self._stopped_at

    def resume(self, process: _Process, *, hide: bool = True) -> float:
        """SIGCONT; with ``hide``, first move the process's clocks back by the pause, so they never
        saw it. Returns the pause's length."""
        if self._stopped_at is None:
            raise ValueError("resume() without stop()")
        paused = self.stopped_for()
        if hide:
            self.hidden += paused
            self._write(self.hidden)
        process.send_signal(signal.SIGCONT)
        self._stopped_at = None
        return paused

    def _write(self, behind: float) -> None:
        """The seconds the process's clocks are behind the kernel's, as the library reads them
        (nanoseconds, a native 64-bit integer), written in place: the process maps this file."""
        flags = os.O_RDWR | os.O_CREAT
        descriptor = os.open(self.control, flags, 0o644)
        try:
            os.pwrite(descriptor, struct.pack("=q", round(behind * 1e9)), 0)
        finally:
            os.close(descriptor)
