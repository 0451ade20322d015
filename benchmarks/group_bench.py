"""ProducerGroup costs on the testbed with the real operator and members as pods:

- handoff time: a member leaves (SIGTERM), crashes (SIGKILL: its pod turns not Ready) or hangs
  (SIGSTOP: only its Lease expires) -> its partitions producing again on another member, measured
  from the signal to the first record the new owner writes for them (its CreateTime);
- GroupProducer exactly-once throughput vs the raw confluent-kafka transactional producer writing
  the same records with the same transaction size (10, 100 and 1,000 records), side by side in
  rounds of interleaved transactions (``_round``).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ordo.control_topics import DEFAULT_CHECKPOINT_TOPIC
from ordo.epochs.log import ensure_log_topics
from ordo.group import GroupProducer
from ordo.member_wire import GROUP_LABEL
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.pods import Pod, PodSet
from ordo_testbed.resources import Groups
from ordo_testbed.waiting import wait_for

from ._plot import HERE, rates
from ._result import Result, alternate, per_record
from ._testbed import full_testbed

SESSION = 3
STEADY = 2.0  # seconds a joined member writes before its signal
BUCKET = 0.2  # seconds per point of the handoff timeline
UNITS_PER_S = 20  # the members' --rate
ROUNDS = 3
TRANSACTION_SIZES = (10, 100, 1_000)  # records per transaction
ROUNDS_EOS = 5
# transactions of each side per round, by transaction size: a few seconds a side
TRANSACTIONS = {10: 1_000, 100: 500, 1_000: 600}
# transactional ids per side, used in turn (the member's source partitions; as many raw producers)
TRANSACTIONAL_IDS = 3
VALUE = b"x" * 100
Sample = tuple[float, float]  # (records/s, CPU µs/record)


class _FirstWrites:
    """Tails the data topic: when each (member, source partition) first wrote after a moment."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "bench-tail", "isolation.level": "read_uncommitted"}
        )
        partitions = self._consumer.list_topics(topic, timeout=10).topics[topic].partitions
        self._consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        self.writes: list[tuple[float, str, int]] = []  # (CreateTime s, member, source partition)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.1)
            if message is None or message.error() is not None:
                continue
            record = json.loads(message.value() or b"{}")
            with self._lock:
                self.writes.append((message.timestamp()[1] / 1000, record["member"], record["p"]))

    def first(self, member: str, partitions: list[int], since: float) -> float | None:
        """When ``member`` had written every one of ``partitions`` after ``since`` (or None)."""
        with self._lock:
            firsts = {
                p: t for t, m, p in reversed(self.writes) if m == member and p in partitions and t >= since
            }
        return max(firsts.values()) if len(firsts) == len(partitions) else None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()


def _member(pods: PodSet, name: str, bootstrap: str, topic: str) -> Pod:
    argv = [
        sys.executable,
        "-m",
        "ordo_sandbox.scenario.group_member",
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
    ]
    argv += ["--records", "10000000", "--batch", "10", "--rate", str(UNITS_PER_S)]
    return pods.start(name, argv, labels={"app": "copy"}, env={"ORDO_GROUP": "copy"}, grace=10)


@dataclass(frozen=True)
class _Handoff:
    """One handoff, wall-clock seconds: the member ``name`` took ``moved`` from the staying member
    and wrote all of them by ``first``, wrote them steadily, got ``signal`` at ``signalled``, and
    the staying member wrote all of them again by ``done``."""

    how: str
    name: str
    moved: list[int]
    first: float
    signalled: float
    done: float

    @property
    def signal(self) -> str:
        return {"leave": "SIGTERM", "crash": "SIGKILL", "hang": "SIGSTOP"}[self.how]


def _handoffs(bootstrap: str, pods: PodSet, groups: Groups) -> dict[str, list[float]]:
    topic = "handoff"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 4)])[topic].result(10)
    groups.create("copy", 4, {"app": "copy"}, sessionTimeoutSeconds=SESSION)
    _member(pods, "stay", bootstrap, topic)
    groups.wait_settled("copy", 1, 60, 4)
    tail = _FirstWrites(bootstrap, topic)
    times: dict[str, list[float]] = {"leave": [], "crash": [], "hang": []}
    handoffs: list[_Handoff] = []
    try:
        for round_ in range(ROUNDS):
            for how in times:
                name = f"{how}-{round_}"
                pod = _member(pods, name, bootstrap, topic)
                groups.wait_settled("copy", 2, 60, 4)
                moved = groups.owners("copy")[name]
                first = wait_for(lambda: tail.first(name, moved, 0), 30, f"{name} to produce")  # noqa: B023
                assert first is not None
                # the member in its steady state, so the timeline shows what the handoff takes away
                steady = first + STEADY
                wait_for(lambda: tail.first(name, moved, steady), 30, f"{name} writing steadily")  # noqa: B023
                began = time.time()
                if how == "leave":
                    pod.sigterm()
                elif how == "crash":
                    pod.sigkill()
                else:
                    pod.pause()
                done = wait_for(lambda: tail.first("stay", moved, began), 60, "the handoff")  # noqa: B023
                assert done is not None
                times[how].append(done - began)
                handoffs.append(_Handoff(how, name, moved, first, began, done))
                groups.wait_settled("copy", 1, 60, 4)
                if how == "hang":
                    pod.sigkill()
                print(f"  {how:6s} round {round_}: {done - began:.2f} s")
    finally:
        tail.close()
        _plot_handoffs(tail.writes, handoffs[:3])
    return times


def _plot_handoffs(writes: list[tuple[float, str, int]], handoffs: list[_Handoff]) -> None:
    """One panel per kind of handoff: the moved source partitions' records/s by the member that
    goes and by the staying member, and the staying member's own partitions, from the moved
    partitions' first move to the new member until after the handoff back."""
    if not handoffs:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, panels = plt.subplots(1, len(handoffs), figsize=(13, 4.8), sharey=True, squeeze=False)
    for axes, h in zip(panels[0], handoffs, strict=True):
        start, end = h.first - 2.5, h.done + 3.0

        going, taking, own = (_rate(writes, h, m, moved, start, end) for m, moved in
                              ((h.name, True), ("stay", True), ("stay", False)))  # fmt: skip
        for points, label, colour in (
            (going, "moved partitions, written by the member that goes", "tab:orange"),
            (taking, "moved partitions, written by the staying member", "tab:blue"),
            (own, "the staying member's own partitions", "tab:grey"),
        ):
            axes.plot(*zip(*points, strict=True), label=label, color=colour, linewidth=1.2)
        axes.axvspan(0, h.done - h.signalled, color="tab:red", alpha=0.18,
                     label="handoff: signal -> every moved partition written again")  # fmt: skip
        axes.axvline(0, color="tab:red", linestyle="--", linewidth=0.8)
        axes.set_title(f"{h.signal} ({h.how}): handoff {h.done - h.signalled:.2f} s", fontsize=10)
        axes.set_xlabel(f"seconds since {h.signal}")
        _label_bursts(axes, going, [taking, own], h.first - h.signalled)
    panels[0][0].set_ylim(top=panels[0][0].get_ylim()[1] * 1.3)  # room for the labels above the spikes
    panels[0][0].set_ylabel(f"source records/s written (per {BUCKET * 1000:g} ms)")
    handles, labels = panels[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    figure.suptitle(
        f"Member throughput through handoffs: 4 source partitions, 2 move to a new member and back to the "
        f"staying one (session {SESSION} s).\nEach member writes {UNITS_PER_S} units of 10 records/s, one "
        "unit at a time over the partitions it owns, so its partitions share its rate",
        fontsize=10,
    )  # fmt: skip
    figure.tight_layout(rect=(0, 0.1, 1, 1))
    figure.savefig(HERE / "handoff_timeline.png", dpi=110)
    plt.close(figure)


def _rate(
    writes: list[tuple[float, str, int]], h: _Handoff, member: str, moved: bool, start: float, end: float
) -> list[tuple[float, float]]:
    """Records/s ``member`` wrote to the moved partitions (or the others), x in seconds since the signal."""
    times = (t for t, m, p in writes if m == member and (p in h.moved) == moved)
    return [(x + start - h.signalled, y) for x, y in rates(times, start, end, BUCKET)]


def _label_bursts(
    axes: Any, going: list[tuple[float, float]], staying: list[list[tuple[float, float]]], took: float
) -> None:
    """Name the spikes, which are no handoff effect: each member's pacer keeps 20 units/s on
    average, so after its loop fell behind (a new member waiting for its assignment, a member the
    shared cores could not keep at pace) it writes the units it missed at once."""
    pace = UNITS_PER_S * 10
    arrow = {"arrowstyle": "->", "color": "grey"}
    first = max((p for p in going if p[0] < took + 0.6), key=lambda p: p[1], default=None)  # its first writes
    if first is not None and first[1] > 1.5 * pace:
        text = "catch-up: the new member's pacer\nmakes up the time it waited\nfor its assignment"
        axes.annotate(text, first, xytext=(first[0] - 2.2, first[1] * 1.1), fontsize=7, arrowprops=arrow)
    after = max((p for line in staying for p in line if p[0] > 0), key=lambda p: p[1], default=None)
    if after is not None and after[1] > 1.5 * pace:
        text = "catch-up: the staying member's pacer\nmakes up units it fell behind on\n"
        text += "(2 shared cores, 2 members)"
        axes.annotate(text, after, xytext=(after[0] + 0.5, after[1] * 1.1), fontsize=7, arrowprops=arrow)


def _throughput(
    bootstrap: str, kubeconfig: Path, pods: PodSet, groups: Groups
) -> dict[int, tuple[list[Sample], list[Sample]]]:
    """Per transaction size, (GroupProducer, raw) samples per round, the first side alternating."""
    topic = "eos"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 4)])[topic].result(10)
    # the member is this process; the pod stands for it, labelled as the operator's pod watch asks
    pods.start(
        "bench",
        [sys.executable, "-c", "import time; time.sleep(3600)"],
        labels={"app": "eos", GROUP_LABEL: "eos"},
    )
    groups.create("eos", TRANSACTIONAL_IDS, {"app": "eos"}, sessionTimeoutSeconds=10)
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    api = _api_client(kubeconfig)
    member = GroupProducer(config, namespace="default", pod="bench", group="eos", api_client=api)
    # murmur2_random: the raw side puts each key on the partition ordo does, so a transaction of
    # 10 records spans as many partitions (AddPartitionsToTxn entries, markers) on both sides
    raw_config = {**config, "partitioner": "murmur2_random"}
    raws = [Producer({**raw_config, "transactional.id": f"bench-raw-{i}"}) for i in range(TRANSACTIONAL_IDS)]
    for raw in raws:
        raw.init_transactions(30)
    try:
        every = list(range(TRANSACTIONAL_IDS))
        wait_for(lambda: member.owned() == every, 60, "the bench member's assignment")
        rates: dict[int, tuple[list[Sample], list[Sample]]] = {}
        for size in TRANSACTION_SIZES:
            rates[size] = ([], [])
            for round_ in range(ROUNDS_EOS):
                ours, theirs = _round(member, raws, topic, size, round_ % 2 == 0)
                rates[size][0].append(ours)
                rates[size][1].append(theirs)
        return rates
    finally:
        member.close()


def _round(
    member: GroupProducer, raws: list[Producer], topic: str, size: int, ours_first: bool
) -> tuple[Sample, Sample]:
    """One round: TRANSACTIONS[size] transactions of each side, the two in turn (the first of each
    pair alternating), each side's transactional ids in turn.

    A transactional id's next transaction comes five transactions after its last: by then the
    coordinator has written the last one's commit markers. Back to back, it had not, often: the
    next AddPartitionsToTxn got CONCURRENT_TRANSACTIONS and librdkafka retried it 20 ms later, in
    15-40% of transactions on either side, a coin flip per transaction that decided a round's
    ratio (0.84-1.15 at 1,000 records a transaction; commit times bimodal, 5-15 and 25-40 ms)."""

    def ours(t: int) -> None:
        _transaction_ours(member, topic, size, t % TRANSACTIONAL_IDS, t)

    def theirs(t: int) -> None:
        _transaction_raw(raws[t % TRANSACTIONAL_IDS], topic, size, t % TRANSACTIONAL_IDS, t)

    transactions = TRANSACTIONS[size]
    spent = alternate(transactions, {"ours": ours, "raw": theirs}, ours_first)
    records = transactions * size
    return per_record(spent["ours"], records), per_record(spent["raw"], records)


def _transaction_ours(member: GroupProducer, topic: str, size: int, source: int, t: int) -> None:
    with member.transaction(source) as tx:
        for i in range(size):
            tx.produce(topic, VALUE, f"k{i}".encode())
        tx.commit(str(t))


def _transaction_raw(raw: Producer, topic: str, size: int, source: int, t: int) -> None:
    """The same records by hand: the data and a checkpoint record in one transaction."""
    raw.begin_transaction()
    for i in range(size):
        raw.produce(topic, VALUE, f"k{i}".encode())
    checkpoint = json.dumps({"checkpoint": str(t), "member": "raw", "generation": 1, "written_at_ms": 0})
    raw.produce(DEFAULT_CHECKPOINT_TOPIC, checkpoint.encode(), f"bench/raw/{source}".encode(), 0)
    raw.commit_transaction(30)


def _api_client(kubeconfig: Path) -> Any:
    config: Any = kubernetes.config
    return config.new_client_from_config(str(kubeconfig))


def run() -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp, full_testbed(Path(tmp)) as (bootstrap, kubeconfig):
        ensure_log_topics(AdminClient({"bootstrap.servers": bootstrap}))
        operator = OperatorProcess(
            kubeconfig, bootstrap, namespaces=["default"], log_path=Path(tmp) / "op.log"
        )
        operator.start()
        api = _api_client(kubeconfig)
        groups = Groups(kubernetes.client.CustomObjectsApi(api), "default")
        with PodSet(kubeconfig, "default", log_dir=Path(tmp) / "pods") as pods:
            try:
                # throughput first: the handoff rounds leave a member producing in the background
                rates = _throughput(bootstrap, kubeconfig, pods, groups)
                times = _handoffs(bootstrap, pods, groups)
            finally:
                operator.stop()
    results = [
        Result.absolute(f"handoff on {how}, p50 of {len(t)}", statistics.median(t), "s", target)
        for how, t, target in (
            ("graceful leave", times["leave"], "<= 2 s"),
            ("crash (pod not Ready)", times["crash"], f"<= {SESSION + 2} s"),
            ("hang (Lease expiry)", times["hang"], f"<= {SESSION + 2} s (session {SESSION} s)"),
        )
    ]
    results += [
        Result.absolute(f"handoff on {how}, max", max(t), "s")
        for how, t in (("graceful leave", times["leave"]), ("hang (Lease expiry)", times["hang"]))
    ]
    for size, (ours, theirs) in rates.items():
        rounds = zip(ours, theirs, strict=True)
        shown = ", ".join(f"{o:,.0f}/{t:,.0f} {oc:.1f}/{tc:.1f}" for (o, oc), (t, tc) in rounds)
        print(f"  exactly-once, {size:,}/txn, per round (ours / raw rec/s, CPU µs/record): {shown}")
        results.append(
            Result.paired(
                f"GroupProducer exactly-once vs raw transactional producer (same data + checkpoint "
                f"record), {size:,} x 100 B per transaction",
                [rate for rate, _ in ours],
                [rate for rate, _ in theirs],
                "rec/s",
                ">= 0.9",
                ([cpu for _, cpu in ours], [cpu for _, cpu in theirs]),
            )
        )
    return results
