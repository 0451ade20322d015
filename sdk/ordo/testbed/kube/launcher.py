"""Run the emulator: in a background thread with its own loop (tests), or in the foreground (CLI)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import yaml
from aiohttp import web

from .cluster import Cluster
from .faults import Faults
from .server import Server
from .state import StateFile
from .store import Store

T = TypeVar("T")
JSON = dict[str, Any]
log = logging.getLogger(__name__)

DEFAULT_TOKEN = "ordo-testbed"


def default_crd_dir() -> Path | None:
    """The repository's ``crds/`` folder when running from a checkout, else None."""
    path = Path(__file__).resolve().parents[4] / "crds"
    return path if path.is_dir() else None


def read_crds(directory: Path | str) -> list[JSON]:
    """Every CustomResourceDefinition in ``*.yaml``/``*.yml``/``*.json`` files of a folder."""
    crds: list[JSON] = []
    for path in sorted(Path(directory).iterdir()):
        if path.suffix in (".yaml", ".yml", ".json"):
            for doc in yaml.safe_load_all(path.read_text()):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    crds.append(doc)
    return crds


def kubeconfig(url: str, token: str | None, namespace: str = "default") -> JSON:
    user: JSON = {"token": token} if token else {}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "ordo-testbed", "cluster": {"server": url}}],
        "users": [{"name": "ordo-testbed", "user": user}],
        "contexts": [
            {
                "name": "ordo-testbed",
                "context": {"cluster": "ordo-testbed", "user": "ordo-testbed", "namespace": namespace},
            }
        ],
        "current-context": "ordo-testbed",
    }


class KubeEmulator:
    """A Kubernetes API emulator serving on 127.0.0.1 from a background thread.

    ``with KubeEmulator() as kube: ...`` or ``start()``/``stop()``. Clients connect with
    ``kubeconfig_path``; tests reach the state with :meth:`call` and inject failures with
    ``faults``. With ``state_dir``, objects and the resourceVersion counter survive restarts.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        state_dir: Path | str | None = None,
        crd_dirs: Iterable[Path | str] | None = None,
        token: str | None = DEFAULT_TOKEN,
        strict_namespaces: bool = True,
        bookmark_interval: float = 20.0,
        history: int = 10_000,
        kubeconfig_path: Path | str | None = None,
    ):
        self.host = host
        self.token = token
        self.state_dir = Path(state_dir) if state_dir is not None else None
        if crd_dirs is None:
            found = default_crd_dir()
            crd_dirs = [found] if found else []
        self.crd_dirs = [Path(d) for d in crd_dirs]
        self.faults = Faults()
        self.cluster = Cluster(Store(history=history), strict_namespaces=strict_namespaces)
        self._state = StateFile(self.state_dir) if self.state_dir is not None else None
        self._server = Server(self.cluster, self.faults, token=token, bookmark_interval=bookmark_interval)
        self._sock = socket.create_server((host, port))
        self.port: int = self._sock.getsockname()[1]
        self._server.address = f"{host}:{self.port}"
        self._tmp: Path | None = None
        self._kubeconfig = Path(kubeconfig_path) if kubeconfig_path else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def kubeconfig_path(self) -> Path:
        """A kubeconfig for this emulator (insecure http, bearer token), in the state dir if any."""
        if self._kubeconfig is None:
            base = self.state_dir or self._tempdir()
            self._kubeconfig = base / "kubeconfig"
            self._write_kubeconfig()
        return self._kubeconfig

    def _write_kubeconfig(self) -> None:
        path = self.kubeconfig_path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(kubeconfig(self.url, self.token)))
        tmp.replace(path)  # readers never see a half-written file

    def _tempdir(self) -> Path:
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="ordo-kube-"))
        return self._tmp

    # --- lifecycle ----------------------------------------------------------------------------

    async def serve(self, ready: Callable[[], None] | None = None) -> None:
        """Serve until :meth:`shutdown` (from any thread) or cancellation."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stopping = asyncio.Event()
        self.cluster.later = lambda delay, fn: loop.call_later(delay, self._guarded, fn)
        flusher: asyncio.Task[None] | None = None
        if self._state is not None:
            self._state.load(self.cluster)
            self.cluster.store.on_change = self._state.mark
            flusher = asyncio.create_task(self._state.run(self.cluster))
        for directory in self.crd_dirs:
            self._load_crds(directory)
        runner = web.AppRunner(
            self._server.app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0
        )
        await runner.setup()
        await web.SockSite(runner, self._sock).start()
        self._write_kubeconfig()  # (re)written at every start: the port may have changed
        if ready is not None:
            ready()
        try:
            await self._stopping.wait()
        finally:
            await self._server.close_watches()
            if flusher is not None:
                flusher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await flusher
            if self._state is not None:
                self._state.save(self.cluster)
            await runner.cleanup()

    def _guarded(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:  # deferred work (GC, grace expiry) must not kill the loop
            log.exception("deferred cluster work failed")

    def start(self) -> KubeEmulator:
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            try:
                asyncio.run(self.serve(ready.set))
            except BaseException as e:
                failure.append(e)
                ready.set()

        self._thread = threading.Thread(target=main, name="kube-emulator", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure:
            raise RuntimeError("the Kubernetes emulator failed to start") from failure[0]
        return self

    def shutdown(self) -> None:
        if self._loop is not None and self._stopping is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                self._loop.call_soon_threadsafe(self._stopping.set)

    def stop(self) -> None:
        self.shutdown()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None
        self._sock.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
            self._kubeconfig = None

    def __enter__(self) -> KubeEmulator:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- access to the state ------------------------------------------------------------------

    def call(self, fn: Callable[[Cluster], T]) -> T:
        """Run ``fn(cluster)`` on the server's loop (the state is not thread-safe) and return its result."""
        if self._loop is None or self._thread is None:
            return fn(self.cluster)

        async def run() -> T:
            return fn(self.cluster)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(30)

    def load_crds(self, directory: Path | str) -> list[str]:
        """Create or update the CRDs found in a folder; returns their names."""
        return self.call(lambda _: self._load_crds(Path(directory)))

    def _load_crds(self, directory: Path) -> list[str]:
        return [self.cluster.apply_crd(crd)["metadata"]["name"] for crd in read_crds(directory)]


def run_foreground(
    *,
    host: str = "127.0.0.1",
    port: int = 6443,
    state_dir: Path | str | None = None,
    crd_dirs: Iterable[Path | str] | None = None,
    kubeconfig_path: Path | str | None = None,
    token: str | None = DEFAULT_TOKEN,
) -> None:
    """Serve until SIGINT/SIGTERM, printing the URL and the kubeconfig path (for ``ordo testbed up``)."""
    emulator = KubeEmulator(
        host=host,
        port=port,
        state_dir=state_dir,
        crd_dirs=crd_dirs,
        kubeconfig_path=kubeconfig_path,
        token=token,
    )

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, emulator.shutdown)

        def ready() -> None:
            print(f"kube emulator at {emulator.url}, kubeconfig {emulator.kubeconfig_path}", flush=True)

        await emulator.serve(ready)

    try:
        asyncio.run(main())
    finally:
        emulator._sock.close()
