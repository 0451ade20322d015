"""The machine's cache of what the harness builds or fetches once (Kafka's jars, the Kubernetes
and Prometheus programs, the e2e's images): ``$ORDO_CACHE_DIR``, else ``$XDG_CACHE_HOME/ordo``,
else ``~/.cache/ordo``."""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_root", "go_mod_version"]

CACHE_ENV = "ORDO_CACHE_DIR"


def cache_root() -> Path:
    root = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ordo"
    )
    return Path(root)


def go_mod_version(module: Path, requirement: str, pinned: str) -> str:
    """The version ``module``'s go.mod requires of ``requirement`` (a module path), or ``pinned``
    outside a checkout (an installed harness has no go.mod)."""
    go_mod = module / "go.mod"
    if go_mod.exists():
        found = re.search(rf"^\s*(?:require\s+)?{re.escape(requirement)} v(\S+)$", go_mod.read_text(), re.M)
        if found:
            return found.group(1)
    return pinned
