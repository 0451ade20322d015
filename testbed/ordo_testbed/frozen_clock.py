"""Processes whose clocks do not count a pause, as a paused virtual machine's do not.

A KVM/QEMU guest that is paused (live migration, ``virsh suspend``, a host under maintenance)
counts the pause neither on CLOCK_MONOTONIC nor, until NTP steps it, on CLOCK_REALTIME: on
resume its timers, leases and librdkafka's delivery timeouts go on as if no time had passed. Here
a process gets the same clocks from libfaketime (Debian's ``libfaketime``, preloaded): it reads
its offset from a control file of its own, and :meth:`FrozenClock.resume` writes the length of
the SIGSTOP into it, backwards, before SIGCONT, so every clock the process reads after waking
goes on from where it stopped.

Debian's libfaketime (0.9.10) converts the absolute deadlines of ``pthread_cond_timedwait``,
``sem_timedwait`` and ``clock_nanosleep`` between its clocks and the kernel's, not those of three
later waits, which under it either never end or end at once: ``sem_clockwait`` (every lock wait
with a timeout in Python 3.11, so ``Event.wait(0.2)`` hung for ever), C11 ``cnd_timedwait``
(librdkafka's condition variables in confluent-kafka's wheel: each of its threads spun at 100%
after a shift) and ``pthread_cond_clockwait``. :func:`wait_shim` compiles a few lines of C (once
per machine, into the cache) that convert those three the same way; it is preloaded before
libfaketime.

Found with libfaketime 0.9.10, and left as it is (docs/reliability.md): at the instant of a
shift a thread may read one clock value off by the pause, either way, because libfaketime
applies a new offset without a lock (a thread stopped between reading the kernel's clock and
adding the offset, or one reading while another re-reads the file).
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import signal
import subprocess
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Protocol

from ordo_testbed.cache import cache_root
from ordo_testbed.waiting import wait_for

__all__ = ["FrozenClock", "FrozenClockUnavailable", "libfaketime", "process_state", "wait_shim"]

LIBFAKETIME_ENV = "ORDO_LIBFAKETIME"
"""A libfaketime.so.1 to use instead of the one found in the system's library folders."""

# libfaketime re-reads the control file when its cache is older than this many whole seconds
# (so after 2 s at most): a pause must outlast that to be hidden on waking.
CACHE_SECONDS = 1
SHORTEST_HIDDEN_PAUSE = CACHE_SECONDS + 2.0

_SHIM = r"""
/* Absolute waits Debian's libfaketime 0.9.10 does not convert (ordo_testbed.frozen_clock). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

/* A deadline on the process's (faked) clock, on the kernel's. */
static struct timespec kernel_deadline(clockid_t clock, const struct timespec *at)
{
    struct timespec faked, real, out;
    clock_gettime(clock, &faked);            /* libfaketime's answer */
    syscall(SYS_clock_gettime, clock, &real); /* the kernel's */
    long long ns = (long long)at->tv_sec * 1000000000LL + at->tv_nsec
        - ((long long)(faked.tv_sec - real.tv_sec) * 1000000000LL + (faked.tv_nsec - real.tv_nsec));
    if (ns < 0)
        ns = 0;
    out.tv_sec = ns / 1000000000LL;
    out.tv_nsec = ns % 1000000000LL;
    return out;
}

int sem_clockwait(sem_t *sem, clockid_t clock, const struct timespec *at)
{
    static int (*next)(sem_t *, clockid_t, const struct timespec *);
    if (!next)
        next = dlsym(RTLD_NEXT, "sem_clockwait");
    struct timespec deadline = kernel_deadline(clock, at);
    return next(sem, clock, &deadline);
}

int pthread_cond_clockwait(pthread_cond_t *cond, pthread_mutex_t *mutex, clockid_t clock,
                           const struct timespec *at)
{
    static int (*next)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);
    if (!next)
        next = dlsym(RTLD_NEXT, "pthread_cond_clockwait");
    struct timespec deadline = kernel_deadline(clock, at);
    return next(cond, mutex, clock, &deadline);
}

int cnd_timedwait(cnd_t *cond, mtx_t *mutex, const struct timespec *at)
{
    static int (*next)(cnd_t *, mtx_t *, const struct timespec *);
    if (!next)
        next = dlsym(RTLD_NEXT, "cnd_timedwait");
    struct timespec deadline = kernel_deadline(CLOCK_REALTIME, at); /* C11: TIME_UTC */
    return next(cond, mutex, &deadline);
}
"""


class FrozenClockUnavailable(RuntimeError):
    """libfaketime or a C compiler is missing: what to install is in the message."""


class _Process(Protocol):
    pid: int

    def send_signal(self, sig: int) -> None: ...


def libfaketime() -> Path:
    """The path of libfaketime.so.1 (``$ORDO_LIBFAKETIME``, else Debian's multiarch folder or a
    library folder's ``faketime/``); FrozenClockUnavailable saying how to install it."""
    given = os.environ.get(LIBFAKETIME_ENV)
    if given:
        if not Path(given).is_file():
            raise FrozenClockUnavailable(f"{LIBFAKETIME_ENV}={given}: no such file")
        return Path(given)
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    candidates = [f"/usr/lib/{multiarch}/faketime/libfaketime.so.1"] if multiarch else []
    for root in ("/usr/lib", "/usr/lib64", "/usr/local/lib"):  # one level: ** follows symlink loops
        candidates += [
            f"{root}/faketime/libfaketime.so.1",
            *sorted(glob.glob(f"{root}/*/faketime/libfaketime.so.1")),
        ]
    for candidate in candidates:
        if Path(candidate).is_file():
            return Path(candidate)
    raise FrozenClockUnavailable(
        "libfaketime.so.1 not found: scripts/system-deps installs it (Debian's package libfaketime), "
        f"or set {LIBFAKETIME_ENV} to its path"
    )


def wait_shim() -> Path:
    """The compiled shim (:data:`_SHIM`), built once per machine and source into the cache."""
    digest = hashlib.sha256(_SHIM.encode()).hexdigest()[:16]
    built = cache_root() / "frozen-clock" / f"waits-{digest}.so"
    if built.is_file():
        return built
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise FrozenClockUnavailable("no C compiler (cc): scripts/system-deps installs gcc")
    built.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=built.parent) as work:
        source, output = Path(work) / "waits.c", Path(work) / "waits.so"
        source.write_text(_SHIM)
        done = subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", str(output), str(source), "-ldl"],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise FrozenClockUnavailable(f"compiling the frozen clock's wait shim failed:\n{done.stderr}")
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
        self.control = directory / f"{name}.faketime"
        self.hidden = 0.0  # seconds of pauses the process's clocks did not count
        self._stopped_at: float | None = None
        self._preload = f"{wait_shim()} {libfaketime()}"  # unavailable: said before any process starts
        self._write(0.0)

    def environment(self) -> dict[str, str]:
        """What the process's environment needs (``LD_PRELOAD`` and libfaketime's settings)."""
        return {
            "LD_PRELOAD": self._preload,
            "FAKETIME_TIMESTAMP_FILE": str(self.control),
            "FAKETIME_CACHE_DURATION": str(CACHE_SECONDS),
        }

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
        saw it. Returns the pause's length. A pause shorter than :data:`SHORTEST_HIDDEN_PAUSE`
        cannot be hidden (libfaketime would not re-read its control file on waking): ValueError,
        and the process stays stopped."""
        if self._stopped_at is None:
            raise ValueError("resume() without stop()")
        paused = self.stopped_for()
        if hide:
            if paused < SHORTEST_HIDDEN_PAUSE:
                raise ValueError(
                    f"a pause of {paused:.1f}s cannot be hidden: libfaketime re-reads its offset at most "
                    f"every {CACHE_SECONDS + 1} s, so pause at least {SHORTEST_HIDDEN_PAUSE:g} s"
                )
            self.hidden += paused
            self._write(-self.hidden)
        process.send_signal(signal.SIGCONT)
        self._stopped_at = None
        return paused

    def _write(self, offset: float) -> None:
        """libfaketime's relative offset ("-12.345678": seconds behind the kernel's clocks),
        replaced whole: the process never reads half a file."""
        temporary = self.control.with_suffix(".tmp")
        temporary.write_text(f"{offset:+.6f}\n")
        os.replace(temporary, self.control)
