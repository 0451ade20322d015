"""kube-apiserver, kube-controller-manager and etcd for the testbed, built once per machine from the
Go module in ``testbed/kube-apiserver`` (its ``build`` script; ``make venv`` runs it) into
``$ORDO_CACHE_DIR/kube-<version>/bin`` (default ``~/.cache/ordo``). The e2e suite's node adds
kubelet, kube-scheduler, kube-proxy and helm (``testbed/kube-node/build``, :func:`node_binaries`)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from pathlib import Path

from ..cache import cache_root, go_mod_version

__all__ = ["KubeSetupError", "binaries", "kube_version", "node_binaries"]

MODULE = Path(__file__).resolve().parents[2] / "kube-apiserver"
NODE_MODULE = MODULE.parent / "kube-node"
PROGRAMS = ("etcd", "kube-apiserver", "kube-controller-manager")
NODE_PROGRAMS = ("kubelet", "kube-scheduler", "kube-proxy", "helm")
_PINNED = "1.33.13"  # what go.mod requires; read from it in a checkout


class KubeSetupError(RuntimeError):
    """The binaries are missing and cannot be built here: says what to do."""


def kube_version() -> str:
    return go_mod_version(MODULE, "k8s.io/kubernetes", _PINNED)


def bin_dir() -> Path:
    return cache_root() / f"kube-{kube_version()}" / "bin"


def binaries(build: bool = True) -> dict[str, Path]:
    """Each program's path; builds them first when missing (about 15 minutes on one core, once)."""
    return _built(PROGRAMS, MODULE, "kube-apiserver", build)


def node_binaries(build: bool = True) -> dict[str, Path]:
    """kubelet, kube-scheduler, kube-proxy and helm for the e2e suite's node; built first when
    missing (a few minutes once the control plane's build cache is warm)."""
    return _built(NODE_PROGRAMS, NODE_MODULE, "kubelet", build)


def _built(programs: tuple[str, ...], module: Path, what: str, build: bool) -> dict[str, Path]:
    folder = bin_dir()
    if not _complete(folder, programs):
        if not build or not (module / "build").exists():
            raise KubeSetupError(
                f"no {what} {kube_version()} in {folder}: run `make venv` in ordo's checkout "
                f"(testbed/{module.name}/build builds it with Go)"
            )
        folder.parent.mkdir(parents=True, exist_ok=True)
        with (folder.parent / ".lock").open("a") as lock:  # one build per machine at a time
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not _complete(folder, programs):
                result = subprocess.run([str(module / "build"), str(folder)], check=False)
                if result.returncode != 0 or not _complete(folder, programs):
                    raise KubeSetupError(f"building {what} {kube_version()} failed (see above)")
    return {name: folder / name for name in programs}


def _complete(folder: Path, programs: tuple[str, ...] = PROGRAMS) -> bool:
    return all(os.access(folder / name, os.X_OK) for name in programs)


def main() -> None:
    """Build now when missing: ``make venv`` does, so the first test run does not wait for it."""
    began = time.monotonic()
    names = ", ".join(binaries())
    print(f"kube-apiserver {kube_version()}: {names} in {bin_dir()} ({time.monotonic() - began:.1f} s)")
