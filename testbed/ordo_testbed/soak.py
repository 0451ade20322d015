"""What ``make soak`` runs beyond ``make test``: with ORDO_SOAK set, every case of an exhaustive
parametrisation; without it (CI), the few that stand for the rest, so CI stays within its time."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from typing import Any

import pytest

SOAK = bool(os.environ.get("ORDO_SOAK"))


def soak_params(values: Iterable[Any], in_ci: Collection[Any]) -> list[Any]:
    """``values`` as pytest params; those not ``in_ci`` are skipped unless ORDO_SOAK is set."""
    skip = pytest.mark.skip(reason="make soak runs it (CI runs a few that stand for the rest)")
    return [pytest.param(v, marks=[] if SOAK or v in in_ci else [skip]) for v in values]
