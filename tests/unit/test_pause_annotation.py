"""The pause annotation (as Strimzi's strimzi.io/pause-reconciliation): "true" in any case pauses."""

from __future__ import annotations

import pytest

from ordo.api.common import PAUSE_ANNOTATION, reconciliation_paused


@pytest.mark.parametrize(
    ("annotations", "paused"),
    [
        ({PAUSE_ANNOTATION: "true"}, True),
        ({PAUSE_ANNOTATION: " True "}, True),
        ({PAUSE_ANNOTATION: "false"}, False),
        ({PAUSE_ANNOTATION: "yes"}, False),
        ({"strimzi.io/pause-reconciliation": "true"}, False),
        (None, False),
    ],
)
def test_only_true_pauses(annotations: dict[str, str] | None, paused: bool) -> None:
    assert reconciliation_paused({"annotations": annotations}) is paused
