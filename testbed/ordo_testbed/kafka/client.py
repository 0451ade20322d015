"""A minimal asyncio Kafka client the proxy uses for its own requests to the upstream broker."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any

from ordo_testbed.kafka import wire


class UpstreamClient:
    """One pipelined connection; responses are matched to requests by correlation id."""

    def __init__(self, host: str, port: int) -> None:
        self._host = host
        self._port = port
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[Any, asyncio.Future[Any]]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def _connect(self) -> asyncio.StreamWriter:
        async with self._lock:
            if self._writer is None or self._writer.is_closing():
                reader, writer = await asyncio.open_connection(self._host, self._port)
                self._writer = writer
                self._reader_task = asyncio.create_task(self._read_loop(reader))
            return self._writer

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                body = await wire.read_frame(reader)
                entry = self._pending.pop(wire.peek_correlation(body), None)
                if entry is None:
                    continue
                request, future = entry
                if not future.done():
                    try:
                        response = wire.decode_response(request.__api_key__, request.__version__, body)
                    except Exception as exc:
                        future.set_exception(exc)
                    else:
                        future.set_result(response)
        except (OSError, asyncio.IncompleteReadError, ConnectionError) as exc:
            self._fail_all(ConnectionError(f"upstream connection lost: {exc!r}"))
        finally:
            if self._writer is not None:
                self._writer.close()
            self._writer = None

    def _fail_all(self, exc: BaseException) -> None:
        for _, future in self._pending.values():
            if not future.done():
                future.set_exception(exc)
        self._pending.clear()

    async def request(self, payload: Any, timeout: float = 10.0) -> Any:
        writer = await self._connect()
        correlation_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (payload, future)
        writer.write(wire.frame(wire.encode_request(payload, correlation_id)))
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(correlation_id, None)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
        self._fail_all(ConnectionError("client closed"))
