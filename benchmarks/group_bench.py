"""ProducerGroup costs on the testbed with the real operator and members as pods:

- handoff time: a member leaves (SIGTERM), crashes (SIGKILL: its pod turns not Ready) or hangs
  (SIGSTOP: only its Lease expires) -> its partitions producing again on another member, measured
  from the signal to the first record the new owner writes for them (its CreateTime);
- GroupProducer exactly-once throughput vs the raw confluent-kafka transactional producer writing
  the same records with the same transaction size (10, 100 and 1,000 records), side by side in
  alternating rounds.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import kubernetes
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ordo.epochs.log import ensure_log_topics
from ordo.group import DEFAULT_CHECKPOINT_TOPIC, GroupProducer
from ordo_testbed.operator import OperatorProcess
from ordo_testbed.pods import Pod, PodSet
from ordo_testbed.resources import Groups
from ordo_testbed.waiting import wait_for

from ._plot import HERE, rates, timeline_png
from ._result import Result
from ._testbed import full_testbed

SESSION = 3
ROUNDS = 3
TRANSACTION_SIZES = (10, 100, 1_000)  # records per transaction
ROUNDS_EOS = 5
VALUE = b"x" * 100


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
    argv += ["--records", "10000000", "--batch", "10", "--rate", "20"]
    return pods.start(name, argv, labels={"app": "copy"}, env={"ORDO_GROUP": "copy"}, grace=10)


def _handoffs(bootstrap: str, pods: PodSet, groups: Groups) -> dict[str, list[float]]:
    topic = "handoff"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 4)])[topic].result(10)
    groups.create("copy", 4, {"app": "copy"}, sessionTimeoutSeconds=SESSION)
    _member(pods, "stay", bootstrap, topic)
    groups.wait_settled("copy", 1, 60, 4)
    tail = _FirstWrites(bootstrap, topic)
    times: dict[str, list[float]] = {"leave": [], "crash": [], "hang": []}
    signals: list[tuple[float, str]] = []
    try:
        for round_ in range(ROUNDS):
            for how in times:
                name = f"{how}-{round_}"
                pod = _member(pods, name, bootstrap, topic)
                groups.wait_settled("copy", 2, 60, 4)
                moved = groups.owners("copy")[name]
                wait_for(lambda: tail.first(name, moved, 0) is not None, 30, f"{name} to produce")  # noqa: B023
                began = time.time()
                signals.append((began, {"leave": "SIGTERM", "crash": "SIGKILL", "hang": "SIGSTOP"}[how]))
                if how == "leave":
                    pod.sigterm()
                elif how == "crash":
                    pod.sigkill()
                else:
                    pod.pause()
                done = wait_for(lambda: tail.first("stay", moved, began), 60, "the handoff")  # noqa: B023
                assert done is not None
                times[how].append(done - began)
                groups.wait_settled("copy", 1, 60, 4)
                if how == "hang":
                    pod.sigkill()
                print(f"  {how:6s} round {round_}: {done - began:.2f} s")
    finally:
        tail.close()
        _plot_handoffs(tail.writes, signals[:3])
    return times


def _plot_handoffs(writes: list[tuple[float, str, int]], signals: list[tuple[float, str]]) -> None:
    """Records/s written by the staying member and by the others, through one round of handoffs."""
    if not signals:
        return
    start, end = signals[0][0] - 3.0, signals[-1][0] + 8.0
    stay = rates((t for t, m, _ in writes if m == "stay"), start, end)
    others = rates((t for t, m, _ in writes if m != "stay"), start, end)
    timeline_png(
        HERE / "handoff_timeline.png",
        {"staying member": stay, "member that leaves / crashes / hangs": others},
        title=f"Member throughput through handoffs (4 source partitions, session {SESSION} s)",
        xlabel="seconds",
        ylabel="source records/s written (per 100 ms)",
        marks=[(t - start, f"{name} to the other member") for t, name in signals],
    )


def _throughput(
    bootstrap: str, kubeconfig: Path, pods: PodSet, groups: Groups
) -> dict[int, tuple[list[float], list[float]]]:
    """Per transaction size, (GroupProducer, raw) records/s per round, the first side alternating."""
    topic = "eos"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 4)])[topic].result(10)
    pods.start("bench", [sys.executable, "-c", "import time; time.sleep(3600)"], labels={"app": "eos"})
    groups.create("eos", 1, {"app": "eos"}, sessionTimeoutSeconds=10)
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    api = _api_client(kubeconfig)
    member = GroupProducer(config, namespace="default", pod="bench", group="eos", api_client=api)
    raw = Producer({**config, "transactional.id": "bench-raw"})
    raw.init_transactions(30)
    try:
        wait_for(lambda: member.owned() == [0], 60, "the bench member's assignment")
        rates: dict[int, tuple[list[float], list[float]]] = {}
        for size in TRANSACTION_SIZES:
            transactions = min(200, max(20, 20_000 // size))
            ours, theirs = rates[size] = ([], [])
            for round_ in range(ROUNDS_EOS):
                for side in ("ours", "raw") if round_ % 2 else ("raw", "ours"):
                    if side == "ours":
                        ours.append(_timed_ours(member, topic, transactions, size))
                    else:
                        theirs.append(_timed_raw(raw, topic, transactions, size))
        return rates
    finally:
        member.close()


def _timed_ours(member: GroupProducer, topic: str, transactions: int, size: int) -> float:
    began = time.perf_counter()
    for t in range(transactions):
        with member.transaction(0) as tx:
            for i in range(size):
                tx.produce(topic, VALUE, f"k{i}".encode())
            tx.commit(str(t))
    return transactions * size / (time.perf_counter() - began)


def _timed_raw(raw: Producer, topic: str, transactions: int, size: int) -> float:
    """The same records by hand: the data and a checkpoint record in each transaction."""
    began = time.perf_counter()
    for t in range(transactions):
        raw.begin_transaction()
        for i in range(size):
            raw.produce(topic, VALUE, f"k{i}".encode())
        checkpoint = json.dumps({"checkpoint": str(t), "member": "raw", "generation": 1, "written_at_ms": 0})
        raw.produce(DEFAULT_CHECKPOINT_TOPIC, checkpoint.encode(), b"bench/raw/0", 0)
        raw.commit_transaction(30)
    return transactions * size / (time.perf_counter() - began)


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
        results.append(
            Result.paired(
                f"GroupProducer exactly-once vs raw transactional producer (same data + checkpoint "
                f"record), {size:,} x 100 B per transaction",
                ours,
                theirs,
                "rec/s",
                ">= 0.9",
            )
        )
    return results
