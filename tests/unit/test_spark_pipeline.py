"""The bucketed sequence check (``check_buckets``) against the per-key step it replaced
(``check_sequences``, the oracle): the same statuses, expected numbers and state, batch after
batch, for random keys, offsets and numbers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from ordo_spark.pipeline import OUTPUT_SCHEMA, check_buckets, check_sequences

COLUMNS = [column.split()[0] for column in OUTPUT_SCHEMA.split(", ")]


class FakeState:
    """GroupState's surface the steps use."""

    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple[Any, ...]:
        assert self.value is not None
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value


def _split(rows: pd.DataFrame, pieces: int) -> Iterator[pd.DataFrame]:
    """A group's rows as Spark may hand them over: in several Arrow batches, some empty."""
    size = max(1, -(-len(rows) // pieces))
    for start in range(0, len(rows) + size, size):
        yield rows.iloc[start : start + size]


row = st.tuples(
    st.sampled_from(["a", "b", "c", "d", None]),  # key (None: a value without "k")
    st.integers(-1, 8),  # seq
    st.integers(0, 3),  # partition
    st.integers(0, 30),  # offset: repeats across partitions, so ties keep arrival order
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(row, max_size=40), min_size=1, max_size=4), st.integers(1, 3))
def test_bucketed_check_matches_the_per_key_check(batches: list[list[tuple[Any, ...]]], pieces: int) -> None:
    bucket_state = FakeState()
    key_states: dict[Any, FakeState] = {}
    for number, batch in enumerate(batches):
        rows = pd.DataFrame(batch, columns=["key", "seq", "partition", "offset"]).astype(
            {"seq": "int64", "partition": "int32", "offset": "int64"}
        )
        rows["epoch"] = pd.Series([number] * len(rows), dtype="int32")
        rows["bucket"] = 7  # the grouping column, which the step ignores
        got = pd.concat(
            [pd.DataFrame(columns=COLUMNS), *check_buckets((7,), _split(rows, pieces), bucket_state)]
        )
        for key, group in rows.groupby("key", dropna=False, sort=False):
            key = None if pd.isna(key) else key
            state = key_states.setdefault(key, FakeState())
            expected = pd.concat(list(check_sequences((key,), _split(group, pieces), state)))
            mine = got[got["key"].isna()] if key is None else got[got["key"] == key]
            assert mine[COLUMNS].astype(str).values.tolist() == expected[COLUMNS].astype(str).values.tolist()
        assert len(got) == len(rows)
    lasts = dict(zip(*json.loads(bucket_state.get[0]), strict=True)) if bucket_state.exists else {}
    assert lasts == {key: state.get[0] for key, state in key_states.items() if state.exists}
