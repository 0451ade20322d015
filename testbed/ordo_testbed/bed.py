"""Both halves of the testbed together: what ``ordo testbed up`` and the sandbox start."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from ordo_testbed.kafka import KafkaTestbed
from ordo_testbed.kube import KubeApiServer

__all__ = ["Testbed", "parse_shell_lines", "testbed_process"]


class Testbed:
    __test__ = False  # not a test class, whatever pytest thinks of the name
    """The Kafka testbed and a Kubernetes API server (with ordo's CRDs installed), on 127.0.0.1."""

    def __init__(
        self,
        *,
        kafka_port: int = 0,
        kube_port: int = 0,
        state_dir: Path | None = None,
        kafka_control_port: int | None = 0,
    ) -> None:
        if state_dir is not None:
            state_dir.mkdir(parents=True, exist_ok=True)
        self.kafka = KafkaTestbed(
            port=kafka_port,
            state_dir=state_dir / "kafka" if state_dir else None,
            control_port=kafka_control_port,
        )
        self.kube = KubeApiServer(
            port=kube_port,
            state_dir=state_dir / "kube" if state_dir else None,
            kubeconfig_path=state_dir / "kubeconfig" if state_dir else None,
        )
        self.startup_seconds = 0.0

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    @property
    def kubeconfig_path(self) -> Path:
        return Path(self.kube.kubeconfig_path)

    def start(self) -> Testbed:
        started = time.monotonic()
        self.kafka.start()
        try:
            self.kube.start()
        except BaseException:
            self.kafka.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        try:
            self.kube.stop()
        finally:
            self.kafka.stop()

    def shell_lines(self) -> list[str]:
        """Shell lines telling clients where the testbed is: ``export NAME=value``, so that
        ``eval "$(ordo testbed up --background ...)"`` sets them (``parse_shell_lines`` reads them)."""
        found = {
            "ORDO_KAFKA_BOOTSTRAP": self.bootstrap,
            # the broker itself, no fault proxy in the path: for measuring ordo, not the proxy
            "KAFKA_DIRECT_BOOTSTRAP": self.kafka.direct_bootstrap,
            "KUBECONFIG": str(self.kubeconfig_path),
        }
        if self.kafka.control_url:
            found["ORDO_KAFKA_FAULTS_URL"] = self.kafka.control_url
        return [f"export {name}={shlex.quote(value)}" for name, value in found.items()]

    def __enter__(self) -> Testbed:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


def parse_shell_lines(lines: Iterable[str]) -> dict[str, str]:
    """NAME -> value of the ``export NAME=value`` lines ``ordo testbed up`` prints (others are skipped)."""
    found: dict[str, str] = {}
    for line in lines:
        words = shlex.split(line.strip(), comments=True)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, _, value = words[1].partition("=")
            found[name] = value
    return found


@contextmanager
def testbed_process(state_dir: Path, timeout: float = 120.0) -> Iterator[tuple[str, Path]]:
    """``ordo testbed up`` in its own process (so the Kafka proxy does not share the caller's GIL):
    yields (Kafka bootstrap, kubeconfig path) once it is ready, and stops it afterwards."""
    state_dir.mkdir(parents=True, exist_ok=True)
    log = (state_dir / "testbed.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "ordo.cli", "testbed", "up", "--kafka-port", "0", "--kube-port", "0",
         "--state-dir", str(state_dir)],
        stdout=subprocess.PIPE, stderr=log, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        found: dict[str, str] = {}
        deadline = time.monotonic() + timeout
        while not {"ORDO_KAFKA_BOOTSTRAP", "KUBECONFIG"} <= found.keys():
            line = process.stdout.readline()  # blocks until the testbed prints where it is
            if not line or time.monotonic() > deadline:
                process.kill()
                process.wait(10)
                tail = (state_dir / "testbed.log").read_text(errors="replace").strip().splitlines()[-1:]
                raise RuntimeError(f"the testbed did not start: {tail[0] if tail else 'no output'}")
            found.update(parse_shell_lines([line]))
        yield found["ORDO_KAFKA_BOOTSTRAP"], Path(found["KUBECONFIG"])
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        log.close()
