"""Small test helpers: raw HTTP against the cluster and a watch collector thread."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import yaml

from .conftest import wait_for


def endpoint(kubeconfig: Path) -> tuple[str, int, dict[str, str]]:
    cfg = yaml.safe_load(kubeconfig.read_text())
    url = urllib.parse.urlsplit(cfg["clusters"][0]["cluster"]["server"])
    token = cfg["users"][0]["user"].get("token")
    return (
        url.hostname or "127.0.0.1",
        url.port or 80,
        ({"Authorization": f"Bearer {token}"} if token else {}),
    )


def request(
    kubeconfig: Path, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], Any]:
    host, port, auth = endpoint(kubeconfig)
    conn = http.client.HTTPConnection(host, port, timeout=10)
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers={**auth, **(headers or {})})
    rsp = conn.getresponse()
    raw = rsp.read()
    conn.close()
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = raw.decode()
    return rsp.status, dict(rsp.getheaders()), parsed


def stream(kubeconfig: Path, path: str, timeout: float = 10) -> Iterator[dict[str, Any]]:
    """Watch events from a raw watch request, until the server ends the stream."""
    host, port, auth = endpoint(kubeconfig)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    conn.request("GET", path, headers=auth)
    rsp = conn.getresponse()
    assert rsp.status == 200, rsp.read()
    try:
        while line := rsp.readline():
            yield json.loads(line)
    finally:
        conn.close()


class Collector:
    """Runs a kubernetes-client watch in a thread and records ``(type, name)`` of its events."""

    def __init__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any):
        self.events: list[tuple[str, str]] = []
        self.error: BaseException | None = None
        self.watch = kubernetes.watch.Watch()
        self._thread = threading.Thread(target=self._run, args=(fn, args, kwargs), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., Any], args: Any, kwargs: Any) -> None:
        try:
            for ev in self.watch.stream(fn, *args, **kwargs):
                obj = ev["object"]
                name = obj["metadata"]["name"] if isinstance(obj, dict) else obj.metadata.name
                self.events.append((ev["type"], name))
        except Exception as e:  # reported by wait(), not as an unhandled thread exception
            self.error = e

    def wait(self, *expected: tuple[str, str], timeout: float = 10) -> None:
        wait_for(lambda: all(e in self.events for e in expected) or self.error, timeout, f"events {expected}")
        assert self.error is None, self.error

    def stop(self) -> None:
        self.watch.stop()
