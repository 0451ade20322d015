"""One Kafka request over a connection of its own, answered synchronously: the readiness probe of
a starting broker, and the questions the replicated cluster asks its brokers (FindCoordinator,
DescribeQuorum) that confluent-kafka's admin client does not ask for us."""

from __future__ import annotations

import socket
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest

from ordo_testbed.kafka import wire

__all__ = ["ask", "probe"]


def ask(host: str, port: int, payload: Any, timeout: float = 5.0) -> Any:
    """Send ``payload`` (a kio request) to host:port and return the decoded response; OSError
    (ConnectionError, a timeout) when the broker does not answer."""
    body = _exchange(host, port, payload, timeout)
    return wire.decode_response(payload.__api_key__, payload.__version__, body)


def probe(host: str, port: int, timeout: float = 0.5) -> bool:
    """True once something at host:port answers an ApiVersions request like a Kafka broker (a
    KRaft broker answers only once it has caught up with the metadata and is unfenced)."""
    request = ApiVersionsRequest(client_software_name="ordo-probe", client_software_version="0")
    try:
        return wire.peek_correlation(_exchange(host, port, request, timeout)) == 1
    except OSError:
        return False


def _exchange(host: str, port: int, payload: Any, timeout: float) -> bytes:
    """The response frame's body (header included) to one request, correlation id 1."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(wire.frame(wire.encode_request(payload, 1, client_id="ordo-testbed")))
        size = int.from_bytes(_recv_exact(sock, 4), "big", signed=True)
        return _recv_exact(sock, size)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ConnectionError("closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
