"""A package index on loopback for the image builds: this machine's pip (its own configuration,
the registry it reaches) builds the wheels of everything the images install into a wheelhouse,
once per machine (again when a pyproject.toml changes), and a small PEP 503 "simple" index
serves it on 127.0.0.1 while Docker builds (``--network host``, ``--build-arg PIP_INDEX_URL``).
So the builds need no route to a package registry of their own, as in an air-gapped build.
"""

from __future__ import annotations

import hashlib
import html
import http.server
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .node import cache_dir, run

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = [ROOT, ROOT / "operator", ROOT / "testbed", ROOT / "spark_apps"]
BUILD_REQUIREMENTS = ["setuptools>=69", "wheel"]  # the projects' build-system.requires
OWN = re.compile(r"^ordo_kafka(_operator|_testbed|_spark)?-")  # the repository's own: built from the context
SPARK_DOCKERFILE = ROOT / "spark_apps" / "Dockerfile"


def pinned() -> list[str]:
    """What spark_apps/Dockerfile installs by exact version besides the repository (pyspark)."""
    return [
        pin
        for pin in re.findall(r'"([A-Za-z0-9_.-]+==[0-9][^"]*)"', SPARK_DOCKERFILE.read_text())
        if not pin.startswith("ordo-kafka")
    ]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheelhouse() -> tuple[Path, str]:
    """The wheelhouse of these projects, and "cached" or "built". One folder per key (the
    projects' requirements): another run on this machine, of another revision, builds its own
    beside it instead of emptying this one under a running build (it did: "No matching
    distribution found for setuptools>=69"). Built in a temporary folder, then renamed."""
    pins = pinned()
    key = hashlib.sha256(
        b"".join((p / "pyproject.toml").read_bytes() for p in PROJECTS) + " ".join(pins).encode()
    ).hexdigest()
    folder = cache_dir() / f"wheelhouse-{key[:16]}"
    if (folder / ".key").exists():
        (folder / ".key").touch()  # in use: kept by the pruning below
        return folder, "cached"
    building = Path(tempfile.mkdtemp(prefix="wheelhouse-building-", dir=cache_dir()))
    try:
        run(sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", building, *PROJECTS, *pins,
            *BUILD_REQUIREMENTS, timeout=1800)  # fmt: skip
        for wheel in building.iterdir():
            if OWN.match(wheel.name):
                wheel.unlink()
        (building / ".key").write_text(key)
        building.rename(folder)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    _prune(keep=folder)
    return folder, "built"


def _prune(keep: Path, unused_days: float = 2) -> None:
    """Wheelhouses no run has used for ``unused_days`` (pyspark alone is 400 MB), and the single
    folder of the layout before."""
    shutil.rmtree(cache_dir() / "wheelhouse", ignore_errors=True)
    for other in cache_dir().glob("wheelhouse-*"):
        marker = other / ".key"
        if other != keep and marker.exists() and time.time() - marker.stat().st_mtime > unused_days * 86400:
            shutil.rmtree(other, ignore_errors=True)


class _Index(http.server.SimpleHTTPRequestHandler):
    folder: Path

    def do_GET(self) -> None:
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if len(parts) == 2 and parts[0] == "simple":
            wanted = _normalized(parts[1])
            links = [
                f'<a href="/files/{html.escape(f.name)}">{html.escape(f.name)}</a><br>'
                for f in sorted(self.folder.iterdir())
                if f.suffix == ".whl" and _normalized(f.name.split("-")[0]) == wanted
            ]
            self._answer(200 if links else 404, "\n".join(links).encode(), "text/html")
        elif len(parts) == 2 and parts[0] == "files" and (self.folder / parts[1]).is_file():
            self._answer(200, (self.folder / parts[1]).read_bytes(), "application/octet-stream")
        else:
            self._answer(404, b"", "text/plain")

    def _answer(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def served(folder: Path) -> Iterator[str]:
    """The wheelhouse as a simple index on 127.0.0.1; yields its URL (``.../simple``)."""
    handler = type("Index", (_Index,), {"folder": folder})
    # the port of the last run, when free: the URL is a build argument, and a new one would make
    # Docker run each build's pip step again instead of taking it from its cache
    remembered = cache_dir() / "index-port"
    port = int(remembered.read_text()) if remembered.exists() else 0
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    remembered.write_text(str(server.server_address[1]))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()
