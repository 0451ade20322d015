"""The ordo operator as a local process against the testbed (tests, the sandbox)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

__all__ = ["OperatorProcess"]


class OperatorProcess:
    """``python -m ordo_operator`` with a kubeconfig and a default Kafka; restartable, killable."""

    def __init__(
        self,
        kubeconfig: Path,
        bootstrap: str,
        *,
        namespaces: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        args: Sequence[str] = (),
    ) -> None:
        """``args``: more of ``ordo_operator``'s options, e.g. ``--no-scanning`` as the chart gives
        a namespace-scoped operator."""
        self.kubeconfig = kubeconfig
        self.bootstrap = bootstrap
        self.namespaces = list(namespaces)
        self.env = dict(env or {})
        self.log_path = log_path
        self.args = list(args)
        self.starts = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> OperatorProcess:
        argv = [sys.executable, "-m", "ordo_operator"]
        for namespace in self.namespaces:
            argv += ["--namespace", namespace]
        argv += self.args
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "ORDO_KAFKA_BOOTSTRAP": self.bootstrap,
            **self.env,
        }
        if self.log_path is not None:
            self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            argv, env=env, stdout=self._log or subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        self.starts += 1
        return self

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no cleanup at all, as when a node dies."""
        self._stop(signal.SIGKILL)

    def stop(self) -> None:
        self._stop(signal.SIGTERM)

    def restart(self) -> None:
        self.kill()
        self.start()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def _stop(self, sig: signal.Signals) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(sig)
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
        self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> OperatorProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
