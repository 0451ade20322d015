"""How ordo's pure costs grow with size (issue: scale), without servers: planning and what is
written for a ProducerGroup of up to 10,000 source partitions and 1,000 members, an expansion
history of up to 2,048 partitions and 100 epochs, the gates and the Spark source driver's
planning per micro-batch over it. Each cost is measured at sizes a factor apart and its growth
fitted on a log-log scale (exponent k: O(n^k)); the curves go to ``benchmarks/scale_curves.png``.
``ORDO_SCALE=long`` adds the largest sizes (here and in the other scale modules).

These are the costs that decide whether a size fits at all: an annotation at most 256 KiB, a
Kafka record (ordo's log topics) 8 MiB. What runs against servers is measured by
``scale_group_bench`` (a ProducerGroup on the kube-apiserver), ``scale_expansion_bench`` (an
expansion with many producers) and ``scale_consumer_bench`` (an AsyncConsumer with many
partitions).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence

from ordo.api import ProducerGroupSpec
from ordo.assignment import assign
from ordo.control_topics import MAX_CONTROL_RECORD_BYTES
from ordo.epochs import EpochHistory, GateKeeper
from ordo.member_wire import MemberAssignment
from ordo_operator.plans.group import settings_of
from ordo_spark.planning import Watermarks, plan_batch, slices

from ._plot import HERE
from ._result import Result

LONG = os.environ.get("ORDO_SCALE") == "long"
PARTITIONS = (100, 1_000, 10_000) + ((30_000,) if LONG else ())
MEMBERS = (10, 100, 1_000)
TOPIC_PARTITIONS = (16, 128, 512, 2_048)
EPOCHS = (10, 30, 100) + ((300,) if LONG else ())
ANNOTATION_LIMIT = 256 * 1024  # all of an object's annotations together
PNG = HERE / "scale_curves.png"


def _seconds(action: Callable[[], object], repeat: int = 3) -> float:
    """The fastest of ``repeat`` runs: planning is CPU-bound, the rest is the machine's noise."""
    best = math.inf
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


def growth(sizes: Sequence[float], costs: Sequence[float]) -> float:
    """The exponent k of cost ~ size^k, least squares on log-log."""
    xs, ys = [math.log(s) for s in sizes], [math.log(max(c, 1e-12)) for c in costs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def _names(count: int) -> list[str]:
    return [f"member-{i:04d}" for i in range(count)]


def _group_costs(partitions: int, members: int) -> dict[str, float]:
    """Planning a join, a leave and a crash with the sticky assignor, and the largest annotation."""
    names = _names(members)
    steady = assign(partitions, names)
    joined = [*names, "member-new"]
    spec = {"sourcePartitions": partitions, "selector": {"matchLabels": {"app": "g"}}, "exactlyOnce": True}
    settings = settings_of(ProducerGroupSpec.model_validate(spec))
    largest = max(
        len(MemberAssignment(group="g", generation=1, partitions=tuple(p), settings=settings).to_annotation())
        for p in steady.values()
    )
    return {
        "join": _seconds(lambda: assign(partitions, joined, steady)),
        "leave": _seconds(lambda: assign(partitions, names[1:], steady)),
        "crash": _seconds(lambda: assign(partitions, names[: members // 2], steady)),
        "annotation": float(largest),
        # one member holding everything: the largest an annotation gets for this group
        "annotation_alone": float(
            len(
                MemberAssignment(group="g", generation=1, partitions=tuple(range(partitions))).to_annotation()
            )
        ),
    }


def _history(partitions: int, epochs: int) -> EpochHistory | None:
    """A topic grown to ``partitions`` in ``epochs`` equal steps from about half as many,
    thresholds at their widest; None when the steps do not fit."""
    step = max(1, partitions // (2 * epochs))
    start = partitions - step * epochs
    if start < 1:
        return None
    history = EpochHistory.initial("t", start)
    while len(history.epochs) <= epochs:
        count = history.active.partitions
        history = history.begin_fence(count + step).publish({p: 2**62 + p for p in range(count)})
    return history


def _gate_seconds(history: EpochHistory) -> float:
    """Per decision, a cold keeper's verdict for a record of the newest epoch in every partition."""
    count = history.active.partitions

    def decide() -> None:
        keeper = GateKeeper(history)
        for q in range(count):
            keeper.gate(q, 2**63 - 2, {})

    return _seconds(decide, repeat=2) / count


def _driver_seconds(history: EpochHistory) -> tuple[float, float]:
    """The Spark source driver's planning of one micro-batch of ``history``'s topic, past every
    threshold (every gate open, each one checked): ``latestOffset`` (``plan_batch``) and
    ``partitions`` (``slices``), without the broker round trips. (first batch after a history
    change, every later batch: the source keeps its GateKeeper while the history stays)."""
    topic, count = history.topic, history.active.partitions
    start = {topic: dict.fromkeys(range(count), 2**63 - 2_000)}
    marks = {topic: {p: Watermarks(0, 2**63 - 1_000) for p in range(count)}}
    keepers: dict[str, GateKeeper] = {}

    def plan(cold: bool) -> None:
        histories = {topic: history.model_copy() if cold else history}  # a copy: as if newly read
        end = plan_batch(
            start, marks, histories, max_records=None, gate=True, fail_on_data_loss=True, keepers=keepers
        )
        slices(start, end.end, histories)

    return _seconds(lambda: plan(True), repeat=2), _seconds(lambda: plan(False), repeat=2)


def run() -> list[Result]:
    rows: list[tuple[int, int, dict[str, float]]] = []
    for partitions in PARTITIONS:
        for members in MEMBERS:
            if members <= partitions:
                rows.append((partitions, members, _group_costs(partitions, members)))
                print(f"  group {partitions:>6} partitions x {members:>5} members: {rows[-1][2]}")
    histories: list[tuple[int, int, int, float, tuple[float, float]]] = []
    for partitions in TOPIC_PARTITIONS:
        for epochs in EPOCHS:
            history = _history(partitions, epochs)
            if history is None:
                continue
            size = len(history.model_dump_json())
            histories.append((partitions, epochs, size, _gate_seconds(history), _driver_seconds(history)))
            gate_us, (first, next_) = round(histories[-1][3] * 1e6), histories[-1][4]
            print(f"  history {partitions:>5} partitions, {epochs:>3} epochs: {size:,} B, gate {gate_us} us, "
                  f"Spark per batch {first * 1e3:.0f} ms first, {next_ * 1e3:.0f} ms next")  # fmt: skip
    at_most = [r for r in rows if r[1] == max(MEMBERS)]
    by_partitions = [r for r in rows if r[1] == MEMBERS[0]]
    join_k = growth([r[0] for r in by_partitions], [r[2]["join"] for r in by_partitions])
    members_k = growth([r[1] for r in rows if r[0] == 10_000], [r[2]["join"] for r in rows if r[0] == 10_000])
    widest = [h for h in histories if h[0] == max(TOPIC_PARTITIONS)]
    history_k = growth([h[1] for h in widest], [h[2] for h in widest])
    ten = [h for h in histories if h[1] == EPOCHS[0]]
    driver_k = (
        growth([h[0] for h in ten], [h[4][1] for h in ten]),
        growth([h[1] for h in widest], [h[4][1] for h in widest]),
    )
    _plot(rows, histories)
    biggest = max(rows, key=lambda r: (r[0], r[1]))
    hundred = next(h for h in histories if h[0] == max(TOPIC_PARTITIONS) and h[1] == 100)
    return [
        Result.absolute(
            f"sticky join, {biggest[0]:,} source partitions x {biggest[1]:,} members (growth in partitions "
            f"O(n^{join_k:.2f}), in members O(n^{members_k:.2f}))",
            biggest[2]["join"],
            "s",
            "<= 1 s",
        ),
        Result.absolute(
            f"largest member annotation, {biggest[0]:,} partitions x {at_most[-1][1]:,} members",
            biggest[2]["annotation"],
            "B",
            f"<= {ANNOTATION_LIMIT}",
        ),
        Result.absolute(
            f"annotation of one member holding all {biggest[0]:,} partitions",
            biggest[2]["annotation_alone"],
            "B",
            f"<= {ANNOTATION_LIMIT}",
        ),
        Result.absolute(
            f"epoch history, 100 expansions up to {hundred[0]:,} partitions (growth in epochs "
            f"O(n^{history_k:.2f}))",
            hundred[2],
            "B",
            f"<= {MAX_CONTROL_RECORD_BYTES}",
        ),
        Result.absolute(
            f"gate decisions for all {hundred[0]:,} partitions, 100 epochs, after a history change",
            hundred[3] * hundred[0],
            "s",
            "<= 1 s",
        ),
        Result.absolute(
            f"Spark driver planning per micro-batch (latestOffset + partitions, every gate checked), "
            f"{hundred[0]:,} partitions, 100 epochs (growth in partitions O(n^{driver_k[0]:.2f}), in epochs "
            f"O(n^{driver_k[1]:.2f}); the first batch after a history change {hundred[4][0]:.2f} s)",
            hundred[4][1],
            "s",
            "<= 1 s",
        ),
    ]


def _plot(
    rows: list[tuple[int, int, dict[str, float]]],
    histories: list[tuple[int, int, int, float, tuple[float, float]]],
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, middle, right, driver) = plt.subplots(1, 4, figsize=(17, 4.2))
    for members in MEMBERS:
        points = [(p, c["join"] * 1000) for p, m, c in rows if m == members]
        if points:
            left.plot(*zip(*points, strict=True), marker="o", label=f"{members:,} members")
    left.set(
        xscale="log", yscale="log", xlabel="source partitions", ylabel="ms", title="sticky join: planning"
    )
    for members in MEMBERS:
        points = [(p, c["annotation"] / 1024) for p, m, c in rows if m == members]
        if points:
            middle.plot(*zip(*points, strict=True), marker="o", label=f"{members:,} members")
    alone = sorted({(p, c["annotation_alone"] / 1024) for p, _, c in rows})
    middle.plot(*zip(*alone, strict=True), linestyle="--", color="grey", label="one member, all")
    middle.axhline(ANNOTATION_LIMIT / 1024, color="tab:red", linewidth=0.8, label="annotations' limit")
    middle.set(xscale="log", yscale="log", xlabel="source partitions", ylabel="KiB",
               title="largest member annotation")  # fmt: skip
    for partitions in TOPIC_PARTITIONS:
        points = [(e, size / 1024) for p, e, size, _, _ in histories if p == partitions]
        right.plot(*zip(*points, strict=True), marker="o", label=f"{partitions:,} partitions")
        points = [(e, seconds[1] * 1000) for p, e, _, _, seconds in histories if p == partitions]
        line = driver.plot(*zip(*points, strict=True), marker="o", label=f"{partitions:,} partitions")
        points = [(e, seconds[0] * 1000) for p, e, _, _, seconds in histories if p == partitions]
        driver.plot(*zip(*points, strict=True), linestyle=":", color=line[0].get_color())
    right.axhline(
        MAX_CONTROL_RECORD_BYTES / 1024, color="tab:red", linewidth=0.8, label="epoch log record limit"
    )
    right.axhline(1000, color="tab:orange", linewidth=0.8, linestyle=":", label="Kafka's 1 MB default")
    right.set(xscale="log", yscale="log", xlabel="epochs", ylabel="KiB", title="epoch history record")
    title = "Spark driver: planning per micro-batch\n(dotted: first after a history change)"
    driver.set(xscale="log", yscale="log", xlabel="epochs", ylabel="ms", title=title)
    for axes in (left, middle, right, driver):
        axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(PNG, dpi=110)
    plt.close(figure)
