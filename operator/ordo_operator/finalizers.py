"""ordo's finalizer: named after ordo, and the one an earlier operator left behind taken away.

kopf holds each ProducerGroup and OrderedTopicExpansion with a finalizer while its daemon runs and
until its deletion handler is done (an expansion deleted mid-flight aborts its epoch first). It
used kopf's default name, ``kopf.zalando.org/KopfFinalizerMarker``: a resource that still carries
it after an upgrade would never be released, since kopf removes only the finalizer it is
configured with. Every event of such a resource takes the old name off (kopf adds ours).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import kopf
from kubernetes.client import CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from ordo.api import API_GROUP
from ordo.api.common import VERSION

from .kube import api_client

__all__ = ["FINALIZER", "LEGACY_FINALIZER", "register"]

FINALIZER = "ordo.dev/finalizer"
LEGACY_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
_log = logging.getLogger(__name__)


def without_legacy(finalizers: Sequence[str]) -> list[dict[str, Any]] | None:
    """The JSON patch that removes the legacy finalizer (tested first, so a list changed
    meanwhile is refused rather than cut at the wrong place), or None when there is none."""
    if LEGACY_FINALIZER not in finalizers:
        return None
    at = f"/metadata/finalizers/{list(finalizers).index(LEGACY_FINALIZER)}"
    return [{"op": "test", "path": at, "value": LEGACY_FINALIZER}, {"op": "remove", "path": at}]


def register(plurals: Sequence[str]) -> None:
    for plural in plurals:

        @kopf.on.event(API_GROUP, VERSION, plural, id=f"drop_legacy_finalizer_{plural}")  # type: ignore[arg-type]
        def drop_legacy_finalizer(
            name: str, namespace: str, meta: dict[str, Any], plural: str = plural, **_: Any
        ) -> None:
            patch = without_legacy(meta.get("finalizers") or [])
            if patch is None:
                return
            try:
                CustomObjectsApi(api_client()).patch_namespaced_custom_object(
                    API_GROUP, VERSION, namespace, plural, name, patch
                )
            except ApiException as error:
                if error.status not in (404, 422):  # gone, or the list changed: the next event retries
                    raise
                return
            _log.info(
                "%s/%s: removed the finalizer %s of an earlier operator", namespace, name, LEGACY_FINALIZER
            )
