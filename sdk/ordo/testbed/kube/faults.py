"""Injected failures for reliability tests: the next N matching requests answer with an error
code and/or after a delay (longer than the client's timeout = a timeout).

Thread-safe: tests add faults from their own thread while the server thread consumes them.
Other processes use the server's ``/_testbed/faults`` endpoint (see :func:`add_remote`).
"""

from __future__ import annotations

import json
import threading
import urllib.request
from dataclasses import asdict, dataclass, fields
from typing import Any

JSON = dict[str, Any]


@dataclass
class Fault:
    verb: str | None = None  # get list watch create update patch delete deletecollection; None = any
    resource: str | None = None  # "pods", "pods/status", "producergroups"; None = any
    namespace: str | None = None
    name: str | None = None
    code: int = 500  # 0 = no error, only the delay
    delay: float = 0.0  # seconds before answering
    count: int = 1  # requests to hit; -1 = until cleared
    message: str = "injected fault"
    hits: int = 0

    def matches(self, verb: str, resource: str, namespace: str | None, name: str | None) -> bool:
        return (
            (self.verb is None or self.verb == verb)
            and (self.resource is None or self.resource == resource)
            and (self.namespace is None or self.namespace == namespace)
            and (self.name is None or self.name == name)
        )


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, **spec: Any) -> Fault:
        """Add a fault; keyword arguments are :class:`Fault`'s fields."""
        fault = Fault(**{k: v for k, v in spec.items() if k in {f.name for f in fields(Fault)}})
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def list(self) -> list[JSON]:
        with self._lock:
            return [asdict(f) for f in self._faults]

    def take(self, verb: str, resource: str, namespace: str | None, name: str | None) -> Fault | None:
        """The first matching fault, counted as hit (and dropped once its count is used up)."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(verb, resource, namespace, name):
                    fault.hits += 1
                    if fault.count >= 0 and fault.hits >= fault.count:
                        self._faults.remove(fault)
                    return fault
        return None


def add_remote(url: str, token: str | None = None, **spec: Any) -> JSON:
    """Add a fault to an emulator in another process (``url`` is its base URL)."""
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    data = json.dumps(spec).encode()
    req = urllib.request.Request(f"{url}/_testbed/faults", data=data, method="POST", headers=headers)
    with urllib.request.urlopen(req, timeout=10) as rsp:
        result: JSON = json.loads(rsp.read())
        return result


def clear_remote(url: str, token: str | None = None) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(f"{url}/_testbed/faults", method="DELETE", headers=headers)
    with urllib.request.urlopen(req, timeout=10):
        pass
