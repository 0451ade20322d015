"""Checkpoint readers refuse a stale owner's writes (issue 35, item 5) — no servers.

At-least-once, nothing fences a member that wakes after its partitions moved. ``applied`` (what a
``CheckpointLog`` holds after each record) refuses a checkpoint of an older generation than one it
read, and a new owner's takeover record keeps the restart point where it was while raising the
generation, so whatever a previous owner writes after it is refused.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ordo.group.checkpoints import Checkpoint, applied


def _held(records: list[Checkpoint]) -> tuple[Checkpoint | None, list[str]]:
    held: Checkpoint | None = None
    refused = []
    for record in records:
        outcome = applied(held, record)
        if isinstance(outcome, str):
            refused.append(outcome)
        else:
            held = outcome
    return held, refused


def test_a_stale_owners_late_checkpoint_is_refused_with_the_reason() -> None:
    old = Checkpoint.now("40", "m-1", 3)
    claim = Checkpoint.takeover_of(old, "m-0", 5)
    held, refused = _held([old, claim, Checkpoint.now("45", "m-1", 3), Checkpoint.now("41", "m-0", 5)])
    assert held is not None and (held.checkpoint, held.member, held.generation) == ("41", "m-0", 5)
    assert len(refused) == 1 and "generation 3 by m-1" in refused[0] and "generation 5" in refused[0]


def test_a_takeover_keeps_the_restart_point_it_follows() -> None:
    stale_view = Checkpoint.takeover_of(Checkpoint.now("30", "m-1", 3), "m-0", 5)
    # m-1 wrote 40 after m-0 read 30 and before m-0's claim: the claim keeps 40, not m-0's view
    held, refused = _held([Checkpoint.now("30", "m-1", 3), Checkpoint.now("40", "m-1", 3), stale_view])
    assert held is not None and (held.checkpoint, held.generation, held.takeover) == ("40", 5, True)
    assert refused == []
    alone, _ = _held([stale_view])  # compaction removed what came before it
    assert alone is not None and alone.checkpoint == "30", "what its writer had read"
    first = Checkpoint.takeover_of(None, "m-0", 1)
    assert _held([first])[0] == first and first.checkpoint is None, "nothing yet: start afresh"


def test_an_ordinary_record_is_encoded_as_older_readers_accept_it() -> None:
    assert "takeover" not in json.loads(Checkpoint.now("7", "m-0", 2).encode())
    claim = Checkpoint.takeover_of(None, "m-0", 2)
    assert json.loads(claim.encode())["takeover"] is True
    assert Checkpoint.model_validate_json(claim.encode()) == claim
    with pytest.raises(ValidationError, match="without a checkpoint"):
        Checkpoint.model_validate({"checkpoint": None, "member": "m", "generation": 1, "written_at_ms": 0})


@given(
    st.lists(st.tuples(st.booleans(), st.integers(min_value=0, max_value=5), st.integers(1, 9)), max_size=60)
)
def test_the_restart_point_never_goes_back_whatever_old_owners_write_late(
    script: list[tuple[bool, int, int]],
) -> None:
    """Owners take the partition one after another in rising generations; each starts from what
    a reader holds once its takeover record is read, and every owner, the replaced ones too,
    keeps writing its own progress at any interleaving. A reader's restart point never goes back."""
    log: list[Checkpoint] = []
    reader: Checkpoint | None = None
    progress: list[int] = []  # owner (= generation - 1) -> its last checkpoint
    points: list[int] = []
    for take_over, who, step in script:
        if take_over or not progress:
            log.append(Checkpoint.takeover_of(reader, f"m-{len(progress)}", len(progress) + 1))
        else:
            owner = who % len(progress)
            progress[owner] += step
            log.append(Checkpoint.now(str(progress[owner]), f"m-{owner}", owner + 1))
        outcome = applied(reader, log[-1])
        if isinstance(outcome, str):
            assert log[-1].generation < len(progress), "only a replaced owner is refused"
            continue
        reader = outcome
        if log[-1].takeover:
            progress.append(int(reader.checkpoint or 0))  # the new owner starts where readers stand
        if reader.checkpoint is not None:
            points.append(int(reader.checkpoint))
    assert points == sorted(points), f"the restart point went back: {points}"


def test_an_exactly_once_reader_takes_the_last_committed_record_whatever_its_generation() -> None:
    """A member whose assignment went stale during a pause takes its partition again: its
    init_transactions fences the owner of generation 42, it reads that owner's last checkpoint and
    commits on from it under its old generation 32. Commit order is owner order there: refusing its
    records made readers restart behind them (the restart point went back, units ran twice)."""
    newer = Checkpoint.now("2430", "m-16", 42)
    later = Checkpoint.now("2435", "m-14", 32)
    assert applied(newer, later, exactly_once=True) == later
    assert isinstance(applied(newer, later), str), "at-least-once still refuses it: nothing fences m-14 there"
