"""The operator's log output: human-readable text (default) or one JSON object per line.

Both go through kopf's own formatters, so a kopf handler's log line carries the Kubernetes object
it is about (``[namespace/name]`` in text, an ``object`` field in JSON) and log pipelines can
filter by resource without parsing messages.
"""

from __future__ import annotations

import logging

import kopf

__all__ = ["FORMATS", "configure_logging"]

FORMATS = {"text": kopf.LogFormat.FULL, "json": kopf.LogFormat.JSON}


def configure_logging(fmt: str = "text", *, verbose: bool = False) -> None:
    """Set up the root logger once, for the whole process (ordo's modules log through it too)."""
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {sorted(FORMATS)}, not {fmt!r}")
    kopf.configure(verbose=verbose, log_format=FORMATS[fmt])
    # the health probe's requests (aiohttp's access log, at info) every few seconds: with --verbose only
    logging.getLogger("aiohttp.access").setLevel(logging.DEBUG if verbose else logging.WARNING)
