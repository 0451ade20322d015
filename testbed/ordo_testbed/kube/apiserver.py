"""A real Kubernetes control plane without nodes, envtest-like: etcd, kube-apiserver and a
kube-controller-manager that runs only the namespace and garbage collectors and the ClusterRole
aggregation (the chart's user roles reach admin/edit/view through it), on free loopback ports.
Pods are local processes (``ordo_testbed.pods`` sets their status, as a kubelet would).

    with KubeApiServer() as kube:                 # ordo's CRDs from crds/ applied and Established
        api = kubernetes.config.new_client_from_config(str(kube.kubeconfig_path))

The kubeconfig speaks HTTPS with the server's CA and an admin client certificate (group
``system:masters``); authorization is Node,RBAC; service-account tokens are signed with a key made
at the first start. With ``state_dir``, etcd's data, the certificates and the kubeconfig live
there and survive restarts. The binaries come from :mod:`.binaries` (built once per machine).

``nodes=True`` makes it a control plane for real nodes (the e2e suite's kubelet): it listens on
``address`` (reachable from pods) and advertises it as the ``kubernetes`` Service's endpoint, the
ServiceAccount admission plugin is on, kube-controller-manager runs every controller, and the
API server reaches kubelets with the admin's client certificate (logs, exec). ``detached=True``:
the processes outlive this one (``pids()`` names them, to stop later).
"""

from __future__ import annotations

import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import yaml

from ordo_testbed.children import die_with_parent
from ordo_testbed.kube.binaries import binaries, kube_version
from ordo_testbed.kube.pki import Pki
from ordo_testbed.waiting import wait_for

__all__ = ["KubeApiServer", "default_crd_dir", "kubeconfig", "read_crds"]

JSON = dict[str, Any]
SERVICE_CIDR = "10.0.0.0/24"
# no kubelet, no scheduler: nothing else has work
CONTROLLERS = "namespace,garbagecollector,clusterrole-aggregation-controller"


def default_crd_dir() -> Path | None:
    """The repository's ``crds/`` folder when running from a checkout, else None."""
    path = Path(__file__).resolve().parents[3] / "crds"
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


def kubeconfig(url: str, pki: Pki, namespace: str = "default") -> JSON:
    """A kubeconfig with everything inline (CA, client certificate and key): it can be copied."""
    data = {name: _b64(pki.path(name)) for name in ("ca.crt", "admin.crt", "admin.key")}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "ordo-testbed", "cluster": {"server": url, "certificate-authority-data": data["ca.crt"]}}
        ],
        "users": [
            {
                "name": "ordo-admin",
                "user": {"client-certificate-data": data["admin.crt"], "client-key-data": data["admin.key"]},
            }
        ],
        "contexts": [
            {
                "name": "ordo-testbed",
                "context": {"cluster": "ordo-testbed", "user": "ordo-admin", "namespace": namespace},
            }
        ],
        "current-context": "ordo-testbed",
    }  # fmt: skip


def _b64(path: Path) -> str:
    import base64

    return base64.b64encode(path.read_bytes()).decode()


def _free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        port: int = sock.getsockname()[1]
        return port


class KubeApiServer:
    """etcd + kube-apiserver + kube-controller-manager as child processes; see the module's doc."""

    def __init__(
        self,
        *,
        port: int = 0,
        state_dir: Path | str | None = None,
        kubeconfig_path: Path | str | None = None,
        crd_dirs: Iterable[Path | str] | None = None,
        start_timeout: float = 120.0,
        address: str = "127.0.0.1",
        server_names: Iterable[str] = (),
        nodes: bool = False,
        detached: bool = False,
    ) -> None:
        self.requested_port = port
        self.port = 0
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self._tmp: Path | None = None
        if crd_dirs is None:
            found = default_crd_dir()
            crd_dirs = [found] if found else []
        self.crd_dirs = [Path(d) for d in crd_dirs]
        self.start_timeout = start_timeout
        self.folder = self.state_dir or Path(tempfile.mkdtemp(prefix="ordo-kube-"))
        if self.state_dir is None:
            self._tmp = self.folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.address, self.nodes, self.detached = address, nodes, detached
        self.pki = Pki(self.folder / "pki", server_names=(address, *server_names))
        self.kubeconfig_path = Path(kubeconfig_path) if kubeconfig_path else self.folder / "kubeconfig"
        self.startup_seconds = 0.0
        self.version = kube_version()
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []

    @property
    def url(self) -> str:
        return f"https://{self.address}:{self.port}"

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> KubeApiServer:
        began = time.monotonic()
        programs = binaries()
        self.pki.ensure()
        try:
            for attempt in range(3):  # a free port can be taken between our probe and the bind
                try:
                    self._start_control_plane(programs)
                    break
                except _PortTaken:
                    self._stop_processes()
                    if attempt == 2 or self.requested_port:
                        raise
            self._write_kubeconfig()
            self._start_controllers(programs)
            self._install_crds()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _start_control_plane(self, programs: dict[str, Path]) -> None:
        etcd_port = _free_port()
        self.port = self.requested_port or _free_port(self.address)
        data = self.folder / "etcd"
        self._spawn("etcd", [
            str(programs["etcd"]), "--name", "ordo", "--data-dir", str(data),
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", "http://127.0.0.1:0", "--initial-cluster", "ordo=http://127.0.0.1:0",
            "--initial-advertise-peer-urls", "http://127.0.0.1:0",
            "--unsafe-no-fsync", "--log-level", "warn", "--logger", "zap",
        ])  # fmt: skip
        self._wait("etcd", lambda: _get(f"http://127.0.0.1:{etcd_port}/health", None) == 200)
        pki = self.pki
        self._spawn("kube-apiserver", [
            str(programs["kube-apiserver"]),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            f"--bind-address={self.address}", f"--advertise-address={self.address}",
            f"--secure-port={self.port}",
            f"--cert-dir={self.folder / 'certs'}",
            f"--tls-cert-file={pki.path('server.crt')}", f"--tls-private-key-file={pki.path('server.key')}",
            f"--client-ca-file={pki.path('ca.crt')}",
            f"--service-account-key-file={pki.path('sa.pub')}",
            f"--service-account-signing-key-file={pki.path('sa.key')}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC", "--allow-privileged=true", "--profiling=false",
            *(self._node_flags() if self.nodes else [
                # no controller creates each namespace's "default" ServiceAccount before its first Pod
                "--disable-admission-plugins=ServiceAccount", "--endpoint-reconciler-type=none",
            ]),
        ])  # fmt: skip
        self._wait("kube-apiserver", lambda: self.get("/readyz") == 200)

    def _node_flags(self) -> list[str]:
        return [
            "--endpoint-reconciler-type=lease",
            "--kubelet-preferred-address-types=InternalIP",  # a node's name need not resolve
            f"--kubelet-client-certificate={self.pki.path('admin.crt')}",
            f"--kubelet-client-key={self.pki.path('admin.key')}",
        ]

    def _start_controllers(self, programs: dict[str, Path]) -> None:
        every = [
            "--controllers=*", f"--service-account-private-key-file={self.pki.path('sa.key')}",
            f"--root-ca-file={self.pki.path('ca.crt')}",
        ]  # fmt: skip
        self._spawn("kube-controller-manager", [
            str(programs["kube-controller-manager"]), f"--kubeconfig={self.kubeconfig_path}",
            *(every if self.nodes else [f"--controllers={CONTROLLERS}"]),
            "--leader-elect=false", "--secure-port=0",
            "--concurrent-namespace-syncs=2", "--concurrent-gc-syncs=2",
        ])  # fmt: skip

    def pids(self) -> dict[str, int]:
        return {name: process.pid for name, process in self._processes.items()}

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.folder / f"{name}.log").open("ab")
        self._logs.append(log)
        self._processes[name] = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            preexec_fn=None if self.detached else die_with_parent, start_new_session=self.detached,
        )  # fmt: skip

    def _wait(self, name: str, ready: Any) -> None:
        process = self._processes[name]

        def up() -> bool:
            if process.poll() is not None:
                tail = self.log_tail(name)
                if "address already in use" in tail:
                    raise _PortTaken(tail)
                raise RuntimeError(f"{name} exited with {process.returncode}: {tail}")
            return bool(ready())

        try:
            wait_for(up, self.start_timeout, f"{name} to be ready", step=0.05)
        except AssertionError as error:
            raise RuntimeError(f"{error}; its log ends: {self.log_tail(name)}") from None

    def log_tail(self, name: str, lines: int = 5) -> str:
        path = self.folder / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def get(self, path: str) -> int | None:
        """The HTTP status of an admin GET (None: no answer)."""
        return _get(self.url + path, self._tls())

    def _tls(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki.path("ca.crt")))
        context.load_cert_chain(str(self.pki.path("admin.crt")), str(self.pki.path("admin.key")))
        return context

    def _write_kubeconfig(self) -> None:
        path = self.kubeconfig_path
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_text(yaml.safe_dump(kubeconfig(self.url, self.pki)))
        partial.chmod(0o600)
        partial.replace(path)  # readers never see a half-written file

    def _install_crds(self) -> None:
        for directory in self.crd_dirs:
            self.apply_crds(read_crds(directory))

    def apply_crds(self, crds: list[JSON]) -> list[str]:
        """Create or replace CRDs and wait until they are Established; returns their names."""
        import kubernetes

        config: Any = kubernetes.config
        with config.new_client_from_config(str(self.kubeconfig_path)) as api:
            ext: Any = kubernetes.client.ApiextensionsV1Api(api)
            names = []
            for crd in crds:
                name = crd["metadata"]["name"]
                try:
                    ext.create_custom_resource_definition(crd)
                except kubernetes.client.ApiException as error:
                    if error.status != 409:
                        raise
                    current = ext.read_custom_resource_definition(name)
                    body = {
                        **crd,
                        "metadata": {**crd["metadata"], "resourceVersion": current.metadata.resource_version},
                    }
                    ext.replace_custom_resource_definition(name, body)
                names.append(name)

            def established() -> bool:
                return all(_established(ext.read_custom_resource_definition(n)) for n in names)

            wait_for(established, 60, f"CRDs {names} to be Established", step=0.05)
            return names

    def stop(self) -> None:
        self._stop_processes()
        for log in self._logs:
            log.close()
        self._logs.clear()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def _stop_processes(self) -> None:
        for name in reversed(list(self._processes)):  # controllers, then the server, then etcd
            process = self._processes.pop(name)
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


class _PortTaken(RuntimeError):
    pass


def _established(crd: Any) -> bool:
    return any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or []))


def _get(url: str, context: ssl.SSLContext | None) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as answer:
            status: int = answer.status
            return status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def run_foreground(
    *, port: int = 6443, state_dir: Path | str | None = None, kubeconfig_path: Path | str | None = None
) -> None:
    """Serve until SIGINT/SIGTERM, printing the URL and the kubeconfig path."""
    with KubeApiServer(port=port, state_dir=state_dir, kubeconfig_path=kubeconfig_path) as server:
        print(
            f"kube-apiserver {server.version} at {server.url}, KUBECONFIG={server.kubeconfig_path}",
            flush=True,
        )
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})  # after the children start
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
