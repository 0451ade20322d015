"""Kafka framing and (de)serialisation of headers and payloads through kio's generated schemas."""

from __future__ import annotations

import asyncio
import io
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

_FRAME = struct.Struct(">i")
# api_key, api_version, correlation_id: the fixed prefix of every request header version.
_REQ_PREFIX = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")

MAX_FRAME = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class RequestPrefix:
    api_key: int
    api_version: int
    correlation_id: int


def peek_request(frame: bytes) -> RequestPrefix:
    api_key, api_version, correlation_id = _REQ_PREFIX.unpack_from(frame, 0)
    return RequestPrefix(api_key, api_version, correlation_id)


_PRODUCE, _FIRST_FLEXIBLE_PRODUCE = 0, 9


def expects_response(prefix: RequestPrefix, frame: bytes) -> bool:
    """False only for a Produce with acks=0, read from the raw bytes without decoding the rest."""
    if prefix.api_key != _PRODUCE:
        return True
    flexible = prefix.api_version >= _FIRST_FLEXIBLE_PRODUCE
    offset = _REQ_PREFIX.size
    (client_id,) = struct.unpack_from(">h", frame, offset)  # nullable string, not compact
    offset += 2 + max(client_id, 0)
    if flexible:
        offset = _skip_tagged_fields(frame, offset)
        length, offset = _uvarint(frame, offset)  # compact nullable transactional_id: length + 1
        offset += max(length - 1, 0)
    else:
        (length,) = struct.unpack_from(">h", frame, offset)
        offset += 2 + max(length, 0)
    (acks,) = struct.unpack_from(">h", frame, offset)
    return bool(acks != 0)


def _uvarint(data: bytes, offset: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7


def _skip_tagged_fields(data: bytes, offset: int) -> int:
    count, offset = _uvarint(data, offset)
    for _ in range(count):
        _, offset = _uvarint(data, offset)
        size, offset = _uvarint(data, offset)
        offset += size
    return offset


def peek_correlation(frame: bytes) -> int:
    value: int = _CORRELATION.unpack_from(frame, 0)[0]
    return value


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """One size-prefixed frame without its size; raises IncompleteReadError at EOF."""
    (size,) = _FRAME.unpack(await reader.readexactly(4))
    if size < 0 or size > MAX_FRAME:
        raise ConnectionError(f"bad Kafka frame size {size}")
    return await reader.readexactly(size)


def frame(payload: bytes) -> bytes:
    return _FRAME.pack(len(payload)) + payload


@cache
def request_schema(api_key: int, version: int) -> type[Any] | None:
    try:
        return load_request_schema(api_key, version)
    except Exception:
        return None


@cache
def response_schema(api_key: int, version: int) -> type[Any] | None:
    try:
        return load_response_schema(api_key, version)
    except Exception:
        return None


_READERS: dict[type[Any], Any] = {}
_WRITERS: dict[type[Any], Any] = {}


def _reader(entity_type: type[Any]) -> Any:
    reader = _READERS.get(entity_type)
    if reader is None:
        reader = _READERS[entity_type] = entity_reader(entity_type)
    return reader


def _writer(entity_type: type[Any]) -> Any:
    writer = _WRITERS.get(entity_type)
    if writer is None:
        writer = _WRITERS[entity_type] = entity_writer(entity_type)
    return writer


def decode_request(frame_body: bytes) -> tuple[RequestHeaderV1 | RequestHeaderV2, Any]:
    """Header and payload of a request frame; raises LookupError when kio lacks the schema."""
    prefix = peek_request(frame_body)
    schema = request_schema(prefix.api_key, prefix.api_version)
    if schema is None:
        raise LookupError(f"no kio schema for api {prefix.api_key} v{prefix.api_version}")
    header_type = schema.__header_schema__
    header, offset = _reader(header_type)(frame_body, 0)
    payload, _ = _reader(schema)(frame_body, offset)
    return header, payload


def decode_response(api_key: int, api_version: int, frame_body: bytes) -> Any:
    schema = response_schema(api_key, api_version)
    if schema is None:
        raise LookupError(f"no kio schema for api {api_key} v{api_version} response")
    _, offset = _reader(schema.__header_schema__)(frame_body, 0)
    payload, _ = _reader(schema)(frame_body, offset)
    return payload


def encode_request(payload: Any, correlation_id: int, client_id: str | None = "ordo-testbed-proxy") -> bytes:
    header_type = payload.__header_schema__
    header = header_type(
        request_api_key=i16(payload.__api_key__),
        request_api_version=i16(payload.__version__),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    return _encode(header, payload)


def encode_request_with(header: RequestHeaderV1 | RequestHeaderV2, payload: Any) -> bytes:
    return _encode(header, payload)


def encode_response(payload: Any, correlation_id: int) -> bytes:
    header_type = payload.__header_schema__
    header: ResponseHeaderV0 | ResponseHeaderV1 = header_type(correlation_id=i32(correlation_id))
    return _encode(header, payload)


def _encode(header: Any, payload: Any) -> bytes:
    buf = io.BytesIO()
    _writer(type(header))(buf, header)
    _writer(type(payload))(buf, payload)
    return buf.getvalue()
