"""``ordo abort-fence``: what it writes, and what it refuses (pure: plan_abort)."""

from __future__ import annotations

import pytest

from ordo.cli import CliError
from ordo.cli.abort_fence import plan_abort
from ordo.epochs import EpochHistory, EpochState

T = "orders"
FENCING = EpochHistory.initial(T, 4).begin_fence(8)


def test_the_fencing_epoch_is_aborted_and_producers_go_back_to_the_previous_count() -> None:
    for epoch in (None, 1):
        aborted, said = plan_abort(T, FENCING, epoch)
        assert aborted == FENCING.abort() and aborted.current.state == EpochState.ABORTED
        assert said == "aborted epoch 1 of 'orders' (4 -> 8): its producers resume at 4 partitions"


def test_nothing_is_written_when_nothing_fences_or_the_epoch_is_aborted_already() -> None:
    assert plan_abort(T, FENCING.abort(), 1) == (None, "epoch 1 of 'orders' is aborted already")
    aborted, said = plan_abort(T, EpochHistory.initial(T, 4), None)
    assert aborted is None and "nothing to abort" in said and "0, is active" in said


@pytest.mark.parametrize(
    ("history", "epoch", "words"),
    [
        (None, None, "has no history of 'orders'"),
        (FENCING, 2, "has no epoch 2 (its last is 1, fencing)"),
        (FENCING.abort().begin_fence(6), 1, None),  # epoch 1 aborted already: fine, nothing written
        (FENCING.publish({p: 0 for p in range(4)}), 1, "was published (8 partitions): it stands"),
    ],
)
def test_a_wrong_epoch_or_a_published_one_is_refused(
    history: EpochHistory | None, epoch: int | None, words: str | None
) -> None:
    if words is None:
        assert plan_abort(T, history, epoch)[0] is None, "the safeguard: epoch 2 fencing is not touched"
        return
    with pytest.raises(CliError, match=words.replace("(", r"\(").replace(")", r"\)")):
        plan_abort(T, history, epoch)
