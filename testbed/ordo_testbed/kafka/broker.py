"""Launchers: the Apache Kafka broker (one KRaft node in one JVM: a single-node cluster alone, or
a member of :class:`~ordo_testbed.kafka.cluster.KafkaCluster`), the fault proxy in front of it on a
background thread, and both together (:class:`KafkaTestbed`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from aiohttp import web

from ordo_testbed.children import die_with_parent
from ordo_testbed.kafka import jars
from ordo_testbed.kafka.control import start_control
from ordo_testbed.kafka.faults import FaultSet
from ordo_testbed.kafka.oneshot import probe
from ordo_testbed.kafka.proxy import FaultProxy

T = TypeVar("T")

HOST = "127.0.0.1"
HEAP = os.environ.get("ORDO_KAFKA_HEAP", "768m")

# One node for everything, sized for 2 cores beside Spark, and quick to react for tests. Every
# other setting is Kafka's own default. (The replicated cluster starts from these too.)
BROKER_SETTINGS: dict[str, str] = {
    "process.roles": "broker,controller",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "BROKER",
    "listener.security.protocol.map": "BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT,CLIENT:PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # classic groups: three consumers started together join one generation, without Kafka's 3 s
    "group.initial.rebalance.delay.ms": "250",
    "group.min.session.timeout.ms": "1000",
    # KIP-848 groups: the broker owns session and heartbeat; short for tests
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "500",
    # abandoned transactions are aborted within a second of their timeout, not 10 s later
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "background.threads": "4",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
}

_LOG4J2 = """\
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.server.KafkaRaftServer
        level: INFO
"""


def free_port(host: str = HOST) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Ports:
    """A node's three listeners: ``client`` (what clients are told), ``broker`` (inter-broker,
    and direct clients) and ``controller`` (the KRaft quorum)."""

    client: int = 0
    broker: int = 0
    controller: int = 0

    @classmethod
    def free(cls, pick: Callable[[], int] = free_port) -> Ports:
        return cls(pick(), pick(), pick())


class KafkaBroker:
    """One Apache Kafka KRaft node, broker and controller in one JVM, on 127.0.0.1.

    Listeners: ``BROKER`` (inter-broker; also direct clients: :attr:`direct_bootstrap`),
    ``CONTROLLER``, and ``CLIENT``, which advertises ``advertised`` (the fault proxy's address)
    so every client that bootstraps through the proxy keeps talking through it.
    ``data_dir``: the log directory, kept across restarts; None: a temporary one.
    ``node_id`` and ``settings``: a member of a larger cluster (``KafkaCluster``) has its own.
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        log_path: Path | None = None,
        *,
        node_id: int = 1,
        settings: Mapping[str, str] = BROKER_SETTINGS,
        heap: str = HEAP,
    ) -> None:
        self._owned_dir: str | None = None
        if data_dir is None:
            self._owned_dir = tempfile.mkdtemp(prefix="ordo-kafka-")
            data_dir = Path(self._owned_dir)
        self.data_dir = data_dir
        self.log_path = log_path or data_dir / "broker.log"
        self.node_id = node_id
        self.heap = heap
        self._base_settings = dict(settings)
        self.ports = Ports()
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def client_port(self) -> int:
        return self.ports.client

    @property
    def broker_port(self) -> int:
        return self.ports.broker

    @property
    def direct_bootstrap(self) -> str:
        return f"{HOST}:{self.broker_port}"

    @property
    def voter(self) -> str:
        """This node in ``controller.quorum.voters``."""
        return f"{self.node_id}@{HOST}:{self.ports.controller}"

    def settings(self, advertised: str, voters: str) -> dict[str, str]:
        return {
            **self._base_settings,
            "node.id": str(self.node_id),
            "listeners": f"BROKER://{HOST}:{self.broker_port},CONTROLLER://{HOST}:{self.ports.controller},"
            f"CLIENT://{HOST}:{self.client_port}",
            "advertised.listeners": f"BROKER://{HOST}:{self.broker_port},CLIENT://{advertised}",
            "controller.quorum.voters": voters,
            "log.dirs": str(self.data_dir / "logs"),
        }

    def start(
        self, advertised: str | None = None, ready: Callable[[], bool] | None = None, timeout: float = 90.0
    ) -> KafkaBroker:
        """Start alone (a single-node cluster) on free ports and wait until ``ready()`` (a probe
        through whatever fronts the CLIENT listener; None: a probe of the broker itself) is true;
        ``advertised``: the CLIENT listener's address for clients (None: itself). Retries with
        other ports if one was taken meanwhile. Alone (no proxy), clients use
        :attr:`direct_bootstrap`."""
        for _ in range(5):
            self.ports = Ports.free()
            self.launch(self.settings(advertised or f"{HOST}:{self.client_port}", self.voter))
            if self.await_ready(ready, timeout):
                return self
        raise RuntimeError(f"Kafka did not start (log: {self.log_path})")

    def launch(self, settings: Mapping[str, str]) -> None:
        """Start the JVM with ``settings`` (from :meth:`settings`) and return at once; the log
        directory is formatted on first use."""
        classpath = jars.classpath()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        properties = self.data_dir / "server.properties"
        properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        logs = Path(settings["log.dirs"])
        if not (logs / "meta.properties").exists():
            logs.mkdir(parents=True, exist_ok=True)
            template = jars.formatted_template(properties, self.node_id)
            for name in ("meta.properties", "bootstrap.checkpoint"):
                shutil.copy(template / name, logs / name)
        log4j = self.data_dir / "log4j2.yaml"
        log4j.write_text(_LOG4J2)
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [jars.java(), f"-Xmx{self.heap}", "-Xms256m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j}",
             "-cp", classpath, "kafka.Kafka", str(properties)],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the terminal must not reach it before we stop it
            preexec_fn=die_with_parent,
        )  # fmt: skip

    def await_ready(self, ready: Callable[[], bool] | None = None, timeout: float = 90.0) -> bool:
        """Wait until ``ready()`` (None: the broker answers on its own port). False, with the
        process stopped, when it exits first (e.g. a port was taken meanwhile) or in ``timeout``."""
        if ready is None:
            ready = lambda: probe(HOST, self.broker_port)  # noqa: E731
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                self._close_log()
                return False
            if ready():
                return True
            time.sleep(0.05)
        self.kill()
        return False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a machine that loses power: no controlled shutdown, the log directory
        stays as it was (the next start recovers it)."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        self._close_log()

    def stop(self, timeout: float = 30.0) -> None:
        """Controlled shutdown (SIGTERM); killed if it takes longer than ``timeout``."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._close_log()
        if self._owned_dir is not None:
            shutil.rmtree(self._owned_dir, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class ProxyThread:
    """Runs a FaultProxy (and optionally its HTTP fault control) on an event loop in a daemon thread."""

    def __init__(self, proxy: FaultProxy, control_port: int | None = None) -> None:
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
            self._runner, self.control_port = await start_control(self.proxy.faults, HOST, self.control_port)

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
    """Apache Kafka behind the fault proxy; clients use ``bootstrap`` (the proxy), benchmarks may
    use ``direct_bootstrap`` (the broker itself, no proxy in the path).

    ``port``: the proxy's port (0: free). ``control_port``: also serve fault control over HTTP
    (0: free port). ``state_dir``: keep the broker's data there (across restarts).
    """

    def __init__(
        self,
        *,
        port: int = 0,
        state_dir: Path | None = None,
        control_port: int | None = None,
        broker_log: Path | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.faults = FaultSet()
        self.broker = KafkaBroker(data_dir=state_dir, log_path=broker_log)
        self._port = port
        self._control_port = control_port
        self._proxy: ProxyThread | None = None
        self.startup_seconds = 0.0

    @property
    def bootstrap(self) -> str:
        assert self._proxy is not None, "testbed not started"
        return self._proxy.proxy.bootstrap

    @property
    def direct_bootstrap(self) -> str:
        return self.broker.direct_bootstrap

    @property
    def proxy(self) -> FaultProxy:
        assert self._proxy is not None, "testbed not started"
        return self._proxy.proxy

    @property
    def control_url(self) -> str | None:
        if self._proxy is None or self._proxy.control_port is None:
            return None
        return f"http://{HOST}:{self._proxy.control_port}"

    def start(self) -> KafkaTestbed:
        began = time.monotonic()
        self.start_proxy()
        try:
            self.broker.start(self.bootstrap, lambda: probe(HOST, self.proxy.port))
        except BaseException:
            self.stop_proxy()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def start_proxy(self) -> None:
        proxy = FaultProxy(lambda: (HOST, self.broker.client_port), port=self._port, faults=self.faults)
        self._proxy = ProxyThread(proxy, self._control_port).start()
        self._port = proxy.port  # a restarted proxy comes back on the same address
        self._control_port = self._proxy.control_port

    def stop_proxy(self) -> None:
        if self._proxy is not None:
            self._proxy.stop()

    def restart_proxy(self) -> None:
        """Stop and start the proxy only (the broker keeps running): every client reconnects."""
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
    state_dir: Path | None = None,
    control_port: int | None = None,
    ready: Any = print,
) -> None:
    """Run the testbed until SIGINT/SIGTERM."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with KafkaTestbed(port=port, state_dir=state_dir, control_port=control_port) as bed:
            ready(
                f"kafka testbed ready: bootstrap={bed.bootstrap} direct={bed.direct_bootstrap} "
                f"control={bed.control_url} pid={os.getpid()}"
            )
            stop.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
