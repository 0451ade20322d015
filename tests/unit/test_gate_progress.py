"""The gate's progress checks, the pure part (ordo.epochs.progress): what a consumer holding gates
asks the broker, and which gates open given the answer. No servers."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ordo.epochs import EpochHistory, Gate, GateKeeper
from ordo.epochs.progress import TopicProgress, asked, group_progress, learned, needs_log_start, verdicts
from ordo.epochs.watcher import ProgressWatcher
from ordo.topic_partition import TP


def test_the_partitions_asked_about_are_those_held_gates_wait_for_at_their_highest_threshold() -> None:
    gates = [
        ("t", Gate(4, 0, 1, {0: 10})),
        ("t", Gate(5, 3, 2, {0: 25, 1: 7})),
        ("u", Gate(2, 0, 1, {0: 3})),
        ("t", Gate(6, 0, None)),  # an epoch not published yet: nothing to ask about
    ]
    assert asked(gates) == {("t", 0): 25, ("t", 1): 7, ("u", 0): 3}
    assert asked([]) == {}


def test_the_log_start_is_asked_only_where_the_committed_offset_falls_short() -> None:
    wanted = {("t", 0): 10, ("t", 1): 10, ("t", 2): 10, ("t", 3): 10}
    committed = {("t", 0): 10, ("t", 1): 9, ("t", 2): -1001}  # 3: no answer
    assert needs_log_start(wanted, committed) == [("t", 1), ("t", 2), ("t", 3)]


def test_the_groups_progress_is_its_commit_or_the_log_start_whichever_is_further() -> None:
    committed = {("t", 0): 12, ("t", 1): -1001, ("t", 2): 4, ("t", 3): 0}
    starts = {("t", 1): 30, ("t", 2): 2, ("t", 3): 0}
    assert group_progress(committed, starts) == {("t", 0): 12, ("t", 1): 30, ("t", 2): 4}


def test_an_answer_adds_to_what_is_known_and_only_a_partition_gone_further_is_news() -> None:
    known = {("t", 0): 3, ("t", 1): 5}
    assert learned(known, {("t", 0): 4}) == {("t", 0): 4, ("t", 1): 5}, "what was not asked stays known"
    assert learned({}, {("t", 1): 1}) == {("t", 1): 1}
    assert learned(known, {("t", 0): 3}) is None  # a partition no further: no gate can have opened
    assert learned(known, {("t", 0): 2, ("t", 1): 5}) is None, "progress never goes back"


def test_a_topics_progress_is_this_consumers_or_the_groups_whichever_is_further() -> None:
    own = {("t", 0): 5, ("t", 1): 9, ("u", 0): 100}
    group = {("t", 0): 7, ("t", 2): 1, ("u", 1): 100}
    progress = TopicProgress("t", own, group)
    assert [progress.get(p, 0) for p in range(4)] == [7, 9, 1, 0]
    assert dict(progress) == {0: 7, 1: 9, 2: 1} and len(progress) == 3
    assert progress[1] == 9 and 3 not in progress


history_st = st.lists(st.integers(1, 12), min_size=2, max_size=4, unique=True).map(sorted)


def _history(counts: list[int], thresholds: st.DataObject) -> EpochHistory:
    history = EpochHistory.initial("t", counts[0])
    for count in counts[1:]:
        old = history.active.partitions
        history = history.begin_fence(count).publish(
            {p: thresholds.draw(st.integers(0, 40)) for p in range(old)}
        )
    return history


@given(history_st, st.data())
def test_held_gates_judged_together_are_the_gates_judged_one_by_one(
    counts: list[int], data: st.DataObject
) -> None:
    history = _history(counts, data)
    partitions = history.active.partitions
    held = {p: data.draw(st.integers(0, 60)) for p in data.draw(st.sets(st.integers(0, partitions - 1)))}
    progress = {p: data.draw(st.integers(0, 60)) for p in range(partitions)}
    together = verdicts(GateKeeper(history), held, progress)
    assert together == {p: GateKeeper(history).gate(p, offset, progress) for p, offset in held.items()}


@given(history_st, st.data())
def test_asking_only_what_held_gates_wait_for_opens_the_gates_the_whole_truth_opens(
    counts: list[int], data: st.DataObject
) -> None:
    """The broker is asked the committed offsets of the partitions held gates wait for, and log
    starts only where those fall short: the gates it opens are the ones the group's whole
    progress (every partition's commit and log start) opens, and each stays waiting for the
    same partitions."""
    history = _history(counts, data)
    partitions = history.active.partitions
    own = {
        ("t", p): data.draw(st.integers(0, 30)) for p in data.draw(st.sets(st.integers(0, partitions - 1)))
    }
    committed = {("t", p): data.draw(st.sampled_from([-1001, 0, 5, 20, 45])) for p in range(partitions)}
    starts = {("t", p): data.draw(st.sampled_from([0, 0, 10, 50])) for p in range(partitions)}
    keeper = GateKeeper(history)
    offsets = {p: data.draw(st.integers(0, 60)) for p in data.draw(st.sets(st.integers(0, partitions - 1)))}
    held = verdicts(keeper, offsets, TopicProgress("t", own, {}))  # as held: by own progress alone
    closed = {p: gate for p, gate in held.items() if not gate.open}

    wanted = asked(("t", gate) for gate in closed.values())
    answered = {tp: committed[tp] for tp in wanted}
    short = needs_log_start(wanted, answered)
    snapshot = group_progress(answered, {tp: starts[tp] for tp in short})
    truth = group_progress(committed, starts)

    asked_only = verdicts(keeper, {p: g.offset for p, g in closed.items()}, TopicProgress("t", own, snapshot))
    whole = verdicts(keeper, {p: g.offset for p, g in closed.items()}, TopicProgress("t", own, truth))
    assert asked_only == whole


@given(history_st, st.data())
def test_rounds_of_asking_while_the_group_progresses_open_every_gate_the_whole_truth_opens(
    counts: list[int], data: st.DataObject
) -> None:
    """The group's committed offsets grow between rounds; each round asks only about what the
    held gates still wait for, and what is learned is kept. Once the group is done, the rounds
    come to rest with the gates the whole truth decides, each waiting for the same partitions.
    Keeping only the last answer, a gate waiting for two partitions met in different rounds
    would go on waiting (each round answering for one and forgetting the other)."""
    history = _history(counts, data)
    partitions = history.active.partitions
    keeper = GateKeeper(history)
    own = {
        ("t", p): data.draw(st.integers(0, 30)) for p in data.draw(st.sets(st.integers(0, partitions - 1)))
    }
    steps = data.draw(st.integers(1, 4))
    final = {("t", p): data.draw(st.integers(0, 50)) for p in range(partitions)}
    # the committed offsets at each round: growing towards the final ones, in random steps
    rounds = [
        {tp: final[tp] * data.draw(st.integers(0, steps)) // steps for tp in final} for _ in range(steps)
    ]
    rounds = [{tp: max(r[tp] for r in rounds[: i + 1]) for tp in final} for i in range(steps)] + [final]
    offsets = {p: data.draw(st.integers(0, 60)) for p in data.draw(st.sets(st.integers(0, partitions - 1)))}
    held = {p: g for p, g in verdicts(keeper, offsets, TopicProgress("t", own, {})).items() if not g.open}
    gates, known = dict(held), dict[TP, int]()
    for round_ in range(len(rounds) + 4 * partitions):
        committed = rounds[min(round_, len(rounds) - 1)]
        wanted = asked(("t", gate) for gate in gates.values())
        answered = {tp: committed[tp] for tp in wanted}
        starts: dict[TP, int] = {}  # retention deleted nothing here
        news = learned(known, group_progress(answered, starts))
        if news is None:
            if round_ >= len(rounds):
                break  # the group is done and nothing moved: at rest
            continue
        known = news
        judged = verdicts(keeper, {p: g.offset for p, g in gates.items()}, TopicProgress("t", own, known))
        gates = {p: gate for p, gate in judged.items() if not gate.open}  # an open gate's records go
    whole = verdicts(
        keeper, {p: g.offset for p, g in held.items()}, TopicProgress("t", own, group_progress(final, {}))
    )
    assert gates == {p: gate for p, gate in whole.items() if not gate.open}


class _Answer:
    def __init__(self, topic: str, partition: int, offset: int, error: object = None) -> None:
        self.topic, self.partition, self.offset, self.error = topic, partition, offset, error


class _Reader:
    """A progress reader whose metadata lacks ``t``'s partition 3: librdkafka answers it with an
    error (Local: Unknown partition) until the topic's metadata is asked again."""

    def __init__(self) -> None:
        self.refreshed: list[str] = []

    def list_topics(self, topic: str, timeout: float) -> None:
        self.refreshed.append(topic)

    def committed(self, asked: list[Any], timeout: float) -> list[_Answer]:
        known = "t" in self.refreshed
        return [
            _Answer(tp.topic, tp.partition, 40, None if known or tp.partition != 3 else "unknown partition")
            for tp in asked
        ]

    def offsets_for_times(self, asked: list[Any], timeout: float) -> list[_Answer]:
        return [_Answer(tp.topic, tp.partition, 0) for tp in asked]

    def poll(self, timeout: float) -> None:  # serves log lines
        return None


def test_a_partition_answered_with_an_error_makes_the_next_round_ask_its_topics_metadata() -> None:
    watcher = ProgressWatcher({"group.id": "g"}, 0.01, 0.1)
    reader = _Reader()
    wanted = {("t", 1): 10, ("t", 3): 10}
    progress, unanswered = watcher._ask(reader, wanted, set())  # type: ignore[arg-type]
    assert progress == {("t", 1): 40} and unanswered == {"t"}
    progress, unanswered = watcher._ask(reader, wanted, unanswered)  # type: ignore[arg-type]
    assert progress == {("t", 1): 40, ("t", 3): 40} and unanswered == set()
