"""ApiVersions, rewritten to advertise what the proxy really serves, and the full handler table."""

from __future__ import annotations

import dataclasses

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType

from . import wire
from .core import ProxyCore
from .entities import element_type
from .group_handlers import GROUP_HANDLERS, GROUP_VERSIONS
from .handlers import HANDLERS as FORWARDING_HANDLERS
from .handlers import Action, Forced, Forward, Handler, Request
from .txn_handlers import TXN_HANDLERS, TXN_VERSIONS


def _kio_versions(api_key: int) -> tuple[int, int]:
    versions = [
        v
        for v, types in schema_name_map[api_key_map[api_key]].items()
        if EntityType.request in types and EntityType.response in types
    ]
    return min(versions), max(versions)


# APIs the proxy decodes, with the highest version it accepts (Fetch/Produce stay on versions
# that name topics instead of topic ids).
_CAPS = {0: 11, 1: 12, 2: 9, 3: 12, 10: 6, 19: 7, 20: 6, 37: 3, 60: 2, **GROUP_VERSIONS, **TXN_VERSIONS}
# DescribeTopicPartitions: clients fall back to Metadata. ConsumerGroupDescribe: KIP-848 groups do
# not exist here (the proxy's coordinator is classic), so describing falls back to DescribeGroups.
_HIDDEN = {69, 75}


async def api_versions(core: ProxyCore, request: Request, forced: Forced) -> Action:
    async def on_response(raw: bytes) -> bytes:
        try:
            response = wire.decode_response(request.prefix.api_key, request.prefix.api_version, raw)
        except Exception:
            return raw  # e.g. UNSUPPORTED_VERSION answered in v0 format
        if response.error_code != ErrorCode.none:
            return raw
        entry_cls = element_type(type(response), "api_keys")
        keys = []
        for key in response.api_keys:
            api = int(key.api_key)
            if api in _HIDDEN:
                continue
            if api in _CAPS:
                low, high = _kio_versions(api)
                key = dataclasses.replace(
                    key,
                    min_version=max(int(key.min_version), low),
                    max_version=min(int(key.max_version), high, _CAPS[api]),
                )
            keys.append(key)
        low, high = _kio_versions(37)
        keys.append(entry_cls(api_key=37, min_version=low, max_version=min(high, _CAPS[37])))
        response = dataclasses.replace(response, api_keys=tuple(sorted(keys, key=lambda k: int(k.api_key))))
        return wire.encode_response(response, request.prefix.correlation_id)

    return Forward(request.body, on_response)


HANDLERS: dict[int, Handler] = {**FORWARDING_HANDLERS, **GROUP_HANDLERS, **TXN_HANDLERS, 18: api_versions}
