"""What every chaos run shares with the people replaying it: the seed it ran with, and its report."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

__all__ = ["chosen_seed", "publish"]


def chosen_seed() -> int:
    """``ORDO_CHAOS_SEED`` (a replay), else a new random seed."""
    return int(os.environ.get("ORDO_CHAOS_SEED") or random.SystemRandom().randrange(2**32))


def publish(report: dict[str, Any]) -> None:
    """Print the report, and append it as one JSON line to ``ORDO_CHAOS_REPORT`` if set (``make soak``)."""
    print(json.dumps(report, indent=1))
    if path := os.environ.get("ORDO_CHAOS_REPORT"):
        with Path(path).open("a") as out:
            out.write(json.dumps(report) + "\n")
