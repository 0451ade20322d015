"""The e2e cluster on this machine: the testbed's control plane (etcd, kube-apiserver,
kube-controller-manager with every controller) with a real node beside it: kubelet, kube-proxy
(iptables) and kube-scheduler, running pods through a containerd of its own (CRI, runc) on a
bridge network (Debian's CNI plugins), all on this host. Docker only builds the images.

Everything stays on this machine: the pods' bridge ``ordo-e2e0`` (10.244.0.0/24) is made here,
the API server listens on the bridge's address, and an iptables rule drops whatever a pod would
send past the bridge. Needs root (bridges, iptables, containerd) and the Debian packages
``scripts/e2e-deps`` installs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import kubernetes
import yaml

from ordo_testbed.cache import cache_root
from ordo_testbed.kube.apiserver import KubeApiServer
from ordo_testbed.kube.binaries import bin_dir, node_binaries
from ordo_testbed.waiting import wait_for

BRIDGE = "ordo-e2e0"
SUBNET = "10.244.0.0/24"
GATEWAY = "10.244.0.1"
SERVICE_IP = "10.0.0.1"  # the `kubernetes` Service: the first address of the testbed's service range
NODE_NAME = "ordo-e2e-node"
RUN_DIR = Path("/run/ordo-e2e")
CONTAINERD_SOCKET = RUN_DIR / "containerd.sock"
# the pod network may talk to itself and to this host, and to nothing past the bridge
_FORWARD_RULE = ["FORWARD", "-i", BRIDGE, "!", "-o", BRIDGE, "-j", "DROP"]
_IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")


def cache_dir() -> Path:
    """The per-machine cache: containerd's images, the e2e's base images' packages, logs."""
    path = cache_root() / "e2e"
    path.mkdir(parents=True, exist_ok=True)
    return path


def run(*argv: str | Path, timeout: float = 900, input: bytes | None = None) -> str:
    result = subprocess.run(
        [str(a) for a in argv], capture_output=True, input=input, timeout=timeout, check=False
    )
    if result.returncode != 0:
        said = result.stderr.decode(errors="replace")[-4000:]
        raise RuntimeError(f"{' '.join(map(str, argv))} failed ({result.returncode}):\n{said}")
    return result.stdout.decode(errors="replace")


def succeeds(*argv: str | Path) -> bool:
    return subprocess.run([str(a) for a in argv], capture_output=True, check=False).returncode == 0


# --- Docker ---------------------------------------------------------------------------------------


def ensure_docker() -> str:
    """A running Docker engine: the one there is, or dockerd started now (it starts its own
    containerd), keeping its images and build cache in the e2e cache (``docker/``). Started here
    it touches no iptables and makes no bridge: builds run with ``--network host`` and the node
    runs no Docker containers. Its runtime folder is not under RUN_DIR, which the node's teardown
    unmounts (doing that to Docker's broke its next build: "can't get final child's PID")."""
    if succeeds("docker", "info"):
        return "running"
    log = (cache_dir() / "dockerd.log").open("ab")
    subprocess.Popen(
        ["dockerd", f"--data-root={cache_dir() / 'docker'}", "--exec-root=/run/ordo-e2e-docker",
         "--iptables=false", "--ip-forward=false", "--ip-masq=false", "--bridge=none"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    wait_for(lambda: succeeds("docker", "info"), 120, "dockerd to answer (log: dockerd.log)", step=0.5)
    return "started"


# --- the node -------------------------------------------------------------------------------------


CONTAINERD_CONFIG = """\
version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{socket}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  # these machines refuse a negative oom_score_adj: without this the sandbox's runc fails
  # ("can't get final child's PID from pipe")
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"
"""


def cni_config(state: Path) -> dict[str, Any]:
    return {
        "cniVersion": "0.4.0",
        "name": "ordo-e2e",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,  # nothing leaves this machine
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": SUBNET, "gateway": GATEWAY}]],
                    # through the host: Service addresses (kube-proxy) and the API server; the
                    # FORWARD rule drops the rest
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(state / "cni-ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(state: Path, ca: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": GATEWAY,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{CONTAINERD_SOCKET}",
        "failSwapOn": False,
        "healthzPort": 0,
        "readOnlyPort": 0,
        "serializeImagePulls": False,
        "resolvConf": "/etc/resolv.conf",
        # the machine's disk and memory are shared: evict nothing for pressure
        "evictionHard": {"memory.available": "0%", "nodefs.available": "0%", "imagefs.available": "0%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "maxPods": 110,
        "shutdownGracePeriod": "0s",
        "makeIPTablesUtilChains": False,  # no KUBE-FIREWALL on this shared machine's INPUT/OUTPUT
    }


class Node:
    """Control plane and node; ``start()`` brings up everything, ``stop()`` takes it down."""

    def __init__(self, state: Path, images: Any, detached: bool = False) -> None:
        self.state = state
        self.images = images  # tests.e2e.images.Images: the pause image's name
        self.detached = detached
        self.control = KubeApiServer(
            state_dir=state / "control-plane",
            address=GATEWAY,
            server_names=[SERVICE_IP, "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                          "kubernetes.default.svc.cluster.local"],
            nodes=True,
            detached=detached,
        )  # fmt: skip
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []
        self.programs: dict[str, Path] = {}

    @property
    def kubeconfig(self) -> Path:
        return self.control.kubeconfig_path

    # -- the host's network ------------------------------------------------------------------------

    def network(self) -> None:
        if not succeeds("ip", "link", "show", BRIDGE):
            run("ip", "link", "add", BRIDGE, "type", "bridge")
        if GATEWAY not in run("ip", "-o", "addr", "show", BRIDGE):
            run("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
        run("ip", "link", "set", BRIDGE, "up")
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        saved = RUN_DIR / "ip_forward.before"
        if not saved.exists():  # put back at the end
            saved.write_text(_IP_FORWARD.read_text())
        _IP_FORWARD.write_text("1\n")  # Service addresses → pods, on the bridge
        if not succeeds("iptables", "-C", *_FORWARD_RULE):
            run("iptables", "-I", *_FORWARD_RULE)

    # -- containerd --------------------------------------------------------------------------------

    def start_containerd(self) -> None:
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        conf = self.state / "cni" / "net.d"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "10-ordo-e2e.conflist").write_text(json.dumps(cni_config(self.state), indent=2))
        config = self.state / "containerd.toml"
        config.write_text(
            CONTAINERD_CONFIG.format(
                root=cache_dir() / "containerd",  # images stay between runs
                state=RUN_DIR / "containerd",
                socket=CONTAINERD_SOCKET,
                pause=self.images.pause,
                cni_bin="/usr/lib/cni",
                cni_conf=conf,
            )
        )
        self._spawn("containerd", ["containerd", "--config", str(config)])
        wait_for(lambda: succeeds(*ctr("version")), 60, "the node's containerd to answer", step=0.2)

    # -- control plane and node ------------------------------------------------------------------------

    def start_control_plane(self) -> None:
        self.control.start()

    def start_node(self) -> None:
        self.programs = node_binaries()
        pki = self.control.pki
        node_crt, node_key = pki.client("node", f"system:node:{NODE_NAME}", "system:nodes")
        proxy_crt, proxy_key = pki.client("proxy", "system:kube-proxy")
        scheduler_crt, scheduler_key = pki.client("scheduler", "system:kube-scheduler")
        kubelet_kubeconfig = self._kubeconfig("kubelet", node_crt, node_key)
        proxy_kubeconfig = self._kubeconfig("kube-proxy", proxy_crt, proxy_key)
        scheduler_kubeconfig = self._kubeconfig("kube-scheduler", scheduler_crt, scheduler_key)
        self._spawn("kube-scheduler", [
            str(self.programs["kube-scheduler"]), f"--kubeconfig={scheduler_kubeconfig}",
            f"--authentication-kubeconfig={scheduler_kubeconfig}",
            f"--authorization-kubeconfig={scheduler_kubeconfig}",
            "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
        ])  # fmt: skip
        self._spawn("kube-proxy", [
            str(self.programs["kube-proxy"]), f"--kubeconfig={proxy_kubeconfig}",
            f"--hostname-override={NODE_NAME}", "--proxy-mode=iptables", f"--cluster-cidr={SUBNET}",
            # every Service connection leaves with the bridge's address: replies come back
            # through the host without the kernel's bridge netfilter
            "--masquerade-all",
            # leave the host's conntrack settings and route_localnet as they are
            "--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0",
            "--conntrack-tcp-timeout-close-wait=0", "--iptables-localhost-nodeports=false",
            "--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256",
        ])  # fmt: skip
        config = self.state / "kubelet.yaml"
        config.write_text(yaml.safe_dump(kubelet_config(self.state, pki.path("ca.crt"))))
        self._spawn("kubelet", [
            str(self.programs["kubelet"]), f"--config={config}", f"--kubeconfig={kubelet_kubeconfig}",
            f"--hostname-override={NODE_NAME}", f"--node-ip={GATEWAY}",
            f"--root-dir={self.state / 'kubelet'}", f"--cert-dir={self.state / 'kubelet-pki'}",
        ])  # fmt: skip
        with kubernetes.config.new_client_from_config(str(self.kubeconfig)) as api:  # type: ignore[no-untyped-call]
            core = kubernetes.client.CoreV1Api(api)
            wait_for(
                lambda: self._node_ready(core), 180, f"node {NODE_NAME} Ready (log: kubelet.log)", step=0.5
            )

    def _node_ready(self, core: kubernetes.client.CoreV1Api) -> bool:
        self._check_alive()
        try:
            node = core.read_node(NODE_NAME)
        except kubernetes.client.ApiException:
            return False
        conditions = (node.status.conditions or []) if node.status else []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    def _check_alive(self) -> None:
        for name, process in self._processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode}: {self.log_tail(name)}")

    def _kubeconfig(self, user: str, crt: Path, key: Path) -> Path:
        pki = self.control.pki
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "e2e", "cluster": {"server": self.control.url,
                                                      "certificate-authority": str(pki.path("ca.crt"))}}],
            "users": [{"name": user, "user": {"client-certificate": str(crt), "client-key": str(key)}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
            "current-context": "e2e",
        }  # fmt: skip
        path = self.state / f"{user}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return path

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        log = (self.state / f"{name}.log").open("ab")
        self._logs.append(log)
        from ordo_testbed.children import die_with_parent

        self._processes[name] = subprocess.Popen(
            list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            preexec_fn=None if self.detached else die_with_parent, start_new_session=self.detached,
        )  # fmt: skip
        (self.state / "pids.json").write_text(json.dumps(self.pids()))

    def pids(self) -> dict[str, int]:
        return {**self.control.pids(), **{n: p.pid for n, p in self._processes.items()}}

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.state / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.strip().splitlines()[-lines:])

    # -- teardown ----------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Every pod deleted at once and the kubelet left to remove them (their sandboxes, network
        namespaces and addresses go through the CNI plugins), then the processes, then whatever
        is still mounted under the state folder, the iptables rules and the bridge."""
        _terminate(self._processes.pop("kube-scheduler", None))  # no new pod lands on the node
        if self._processes.get("kubelet") is not None and self.control.port:
            self._drain_pods()
        for name in ("kubelet", "kube-proxy"):
            _terminate(self._processes.pop(name, None))
        remove_pods()
        _terminate(self._processes.pop("containerd", None))
        self.control.stop()
        for log in self._logs:
            log.close()
        unmount_under(self.state)
        clean_network()

    def _drain_pods(self) -> None:
        try:
            with kubernetes.config.new_client_from_config(str(self.kubeconfig)) as api:  # type: ignore[no-untyped-call]
                core = kubernetes.client.CoreV1Api(api)
                for pod in core.list_pod_for_all_namespaces().items:
                    if pod.spec and pod.spec.node_name == NODE_NAME and pod.metadata:
                        meta = pod.metadata
                        core.delete_namespaced_pod(
                            str(meta.name), str(meta.namespace), grace_period_seconds=0
                        )
            wait_for(
                lambda: not run(*ctr("tasks", "ls", "-q")).split(),
                180,
                "the kubelet to stop every pod",
                step=1,
            )
        except (AssertionError, kubernetes.client.ApiException, RuntimeError) as error:
            print(f"pods left to remove through containerd: {error}")


def ctr(*argv: str) -> list[str]:
    """A ``ctr`` command line against the node's containerd, in the CRI's namespace."""
    return ["ctr", "--address", str(CONTAINERD_SOCKET), "--namespace", "k8s.io", *argv]


def crictl_like_stop(container_id: str) -> None:
    """Kill a container's process from the node with SIGKILL, as ``crictl stop --timeout 0`` or
    ``docker kill`` would: no graceful stop, the kubelet sees the container die."""
    run(*ctr("tasks", "kill", "--signal", "SIGKILL", container_id))


def remove_pods() -> None:
    """Every task and container of the node's containerd, and the pods' network namespaces."""
    if not CONTAINERD_SOCKET.exists() or not succeeds(*ctr("version")):
        return
    for line in run(*ctr("tasks", "ls", "-q")).split():
        subprocess.run(ctr("tasks", "kill", "--signal", "SIGKILL", line), capture_output=True, check=False)
    deadline = time.monotonic() + 30
    for line in run(*ctr("containers", "ls", "-q")).split():
        while time.monotonic() < deadline:  # a killed task is deleted once it has exited
            done = subprocess.run(ctr("tasks", "delete", line), capture_output=True, check=False)
            if done.returncode == 0 or b"not found" in done.stderr:
                break
            time.sleep(0.2)
        subprocess.run(ctr("containers", "delete", line), capture_output=True, check=False)


def unmount_under(folder: Path) -> None:
    """Unmount what the kubelet mounted for pods under ``folder`` (deepest first)."""
    prefix = str(folder.resolve()) + "/"
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def clean_network() -> None:
    """The FORWARD rule, kube-proxy's chains (``kube-proxy --cleanup``), any other ``KUBE-``
    chain the kubelet left, the pods' network namespaces and the bridge."""
    if succeeds("iptables", "-C", *_FORWARD_RULE):
        run("iptables", "-D", *_FORWARD_RULE)
    proxy = bin_dir() / "kube-proxy"
    if proxy.exists():
        subprocess.run([str(proxy), "--cleanup"], capture_output=True, check=False)
    for save, restore in (("iptables-save", "iptables-restore"), ("ip6tables-save", "ip6tables-restore")):
        for table in ("filter", "nat", "mangle"):
            rules = subprocess.run([save, "-t", table], capture_output=True, text=True, check=False).stdout
            if "KUBE-" in rules:  # the table again without them (restore replaces a table whole)
                kept = "\n".join(line for line in rules.splitlines() if "KUBE-" not in line) + "\n"
                subprocess.run([restore], input=kept, text=True, capture_output=True, check=False)
    unmount_under(RUN_DIR)
    for netns in Path("/run/netns").glob("cni-*"):  # made by the node's CNI plugins, for its pods
        subprocess.run(["umount", "-l", str(netns)], capture_output=True, check=False)
        netns.unlink(missing_ok=True)
    if succeeds("ip", "link", "show", BRIDGE):
        run("ip", "link", "delete", BRIDGE)
    saved = RUN_DIR / "ip_forward.before"
    if saved.exists():
        _IP_FORWARD.write_text(saved.read_text())
        saved.unlink()


def stop_kept(state: Path) -> None:
    """Stop what a run with ORDO_E2E_KEEP=1 left running (its pids.json)."""
    pids = state / "pids.json"
    if not pids.exists():
        return
    for name, pid in reversed(list(json.loads(pids.read_text()).items())):
        if name == "containerd":
            remove_pods()  # the containers outlive containerd otherwise
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        wait_for(_gone(pid), 30, f"{name} ({pid}) to exit", step=0.1)
    pids.unlink()
    unmount_under(state)
    clean_network()


def _gone(pid: int) -> Callable[[], bool]:
    return lambda: not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone for our purpose
        return stat.read().split(") ", 1)[1][0] != "Z"


def _terminate(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
