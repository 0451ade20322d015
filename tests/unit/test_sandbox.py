"""The sandbox's pure parts: the source, the stage schedule, the Kafka-side checker, the report's
verdict, the live view and its log readers."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path

import pytest
from rich.console import Console

from ordo.cli import main as ordo
from ordo.verify import ActiveEpoch, StoredRecord, check_topic, epoch_of, parse_epochs
from ordo_sandbox import source
from ordo_sandbox.monitor import LiveOrder, LogTail, closed_gates, slow_units
from ordo_sandbox.report import SandboxReport, SparkOutcome, StageOutcome, checks, render
from ordo_sandbox.scenario.verify import Verdict
from ordo_sandbox.source import source_counts
from ordo_sandbox.stages import (
    MIN_DURATION,
    Step,
    partitions_moved,
    resource_prefix,
    schedule,
    topic_name_problem,
)
from ordo_sandbox.view import MemberRow, Snapshot
from ordo_sandbox.view import render as render_view
from ordo_testbed.records import decode_record

# --- the source ---------------------------------------------------------------------------------


def test_orders_are_numbered_per_customer_and_read_after_a_checkpoint_in_change_order(tmp_path: Path) -> None:
    db = tmp_path / "orders.db"
    source.create(db)
    writer = source.OrderWriter(db, partitions=4, customers=10, seed=1)
    assert writer.insert(200) == 200
    counts = source_counts(db)
    assert sum(counts.values()) == 200
    with closing(source.connect(db)) as connection:
        for src in range(4):
            orders = source.orders_after(connection, src, None, 1000)
            stamps = [o.last_change_ts for o in orders]
            assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
            assert all(int(o.customer.split("-")[1]) % 4 == src for o in orders)
            for customer in {o.customer for o in orders}:
                assert [o.seq for o in orders if o.customer == customer] == list(range(counts[customer]))
            middle = orders[len(orders) // 2]
            rest = source.orders_after(connection, src, middle.last_change_ts, 1000)
            assert rest == orders[len(orders) // 2 + 1 :]
            assert len(source.orders_after(connection, src, None, 3)) == 3


def test_a_new_writer_continues_each_customers_numbers(tmp_path: Path) -> None:
    db = tmp_path / "orders.db"
    source.create(db)
    source.OrderWriter(db, 2, 3, seed=1).insert(30)
    source.OrderWriter(db, 2, 3, seed=2).insert(30)
    with closing(source.connect(db)) as connection:
        rows = connection.execute("SELECT customer, seq FROM orders ORDER BY id").fetchall()
    for customer in {c for c, _ in rows}:
        assert [s for c, s in rows if c == customer] == list(range(sum(1 for c, _ in rows if c == customer)))


def test_order_values_carry_key_and_number_for_the_verifiers() -> None:
    order = source.Order(7, 3, "customer-0011", 4, 1234, source.timestamp(1_700_000_000_000_001))
    value = json.loads(order.value("orders-cdc-1"))
    assert (value["k"], value["s"], value["member"]) == ("customer-0011", 4, "orders-cdc-1")
    assert order.last_change_ts == "2023-11-14T22:13:20.000001Z"
    assert decode_record(order.value("m")) == ("customer-0011", 4)


def test_the_writer_thread_inserts_at_its_rate_until_stopped(tmp_path: Path) -> None:
    db = tmp_path / "orders.db"
    source.create(db)
    thread = source.WriterThread(source.OrderWriter(db, 8, 50), rate=1000)
    thread.start()
    from ordo_testbed.waiting import wait_for

    wait_for(lambda: thread.writer.inserted >= 100, 20, "inserts")
    inserted = thread.stop()
    assert thread.error is None and sum(source_counts(db).values()) == inserted


# --- stages -------------------------------------------------------------------------------------


def test_the_schedule_spreads_the_stages_over_the_run_in_order() -> None:
    stages = schedule(100)
    assert [s.step for s in stages] == [
        Step.ADD_MEMBER, Step.EXPAND, Step.KILL_MEMBER, Step.JOIN_MEMBER, Step.STOP_WRITER,
    ]  # fmt: skip
    assert [s.at for s in stages] == sorted(s.at for s in stages)
    assert stages[-1].at == 100 and 0 < stages[0].at < 30
    with pytest.raises(ValueError, match="at least"):
        schedule(MIN_DURATION - 1)


def test_partitions_moved_needs_the_victim_gone_and_its_partitions_owned() -> None:
    assert partitions_moved("m-1", [2, 3], {"m-0": [0, 1, 2], "m-2": [3]}, 2)
    assert not partitions_moved("m-1", [2, 3], {"m-0": [0, 1], "m-1": [2, 3]}, 2)  # still listed
    assert not partitions_moved("m-1", [2, 3], {"m-0": [0, 1, 2]}, 1)  # 3 not owned yet
    assert not partitions_moved("m-1", [2], {"m-0": [0, 1, 2]}, 2)  # a member missing


# --- the Kafka-side checker ---------------------------------------------------------------------

EPOCHS = [ActiveEpoch(0, 2), ActiveEpoch(1, 4, 2, {0: 3, 1: 2})]


def test_epoch_of_follows_thresholds_and_created_partitions() -> None:
    assert epoch_of(EPOCHS, 0, 2) == 0 and epoch_of(EPOCHS, 0, 3) == 1
    assert epoch_of(EPOCHS, 3, 0) == 1 and epoch_of([], 5, 100) == 0
    assert epoch_of([*EPOCHS, ActiveEpoch(2, 8, 4, {0: 9, 1: 9, 2: 5, 3: 5})], 3, 5) == 2


def test_parse_epochs_keeps_active_epochs_of_an_epoch_log_value() -> None:
    value = {"topic": "t", "epochs": [
        {"epoch": 0, "partitions": 2, "state": "active", "from_partitions": None, "thresholds": {}},
        {"epoch": 1, "partitions": 4, "state": "active", "from_partitions": 2,
         "thresholds": {"0": 3, "1": 2}},
        {"epoch": 2, "partitions": 8, "state": "aborted", "from_partitions": 4, "thresholds": {}},
    ]}  # fmt: skip
    assert parse_epochs(value) == EPOCHS


def test_a_key_moved_by_an_expansion_is_checked_in_epoch_order() -> None:
    # key a: #0, #1 in partition 0 below its threshold 3; #2 in new partition 2 (epoch 1)
    records = [StoredRecord(2, 0, "a", 2), StoredRecord(0, 0, "a", 0), StoredRecord(0, 1, "a", 1)]
    verdict = check_topic("t", records, EPOCHS, {"a": 3})
    assert verdict.ok and verdict.records == 3 and verdict.epochs == 2, verdict.summary()
    # #2 stored in the old epoch, #1 in the new one: a reordering
    bad = [StoredRecord(0, 0, "a", 0), StoredRecord(0, 1, "a", 2), StoredRecord(2, 0, "a", 1)]
    assert check_topic("t", bad, EPOCHS, {"a": 3}).order_violations == 1


def test_a_record_placed_by_the_old_count_after_the_threshold_is_out_of_order() -> None:
    """A producer paused past its session wakes and lands #2 of key a in partition 0 after the
    threshold (epoch 1), where epoch 1 puts a in partition 2: sorted by partition it even looks in
    order, but a consumer may read it before or after #3, so it is counted."""
    records = [
        StoredRecord(0, 0, "a", 0),
        StoredRecord(0, 1, "a", 1),
        StoredRecord(0, 5, "a", 2),  # past partition 0's threshold 3: epoch 1, yet in partition 0
        StoredRecord(2, 0, "a", 3),
        StoredRecord(2, 1, "a", 4),
    ]
    verdict = check_topic("t", records, EPOCHS, {"a": 5})
    assert (verdict.misplaced, verdict.order_violations) == (1, 1), verdict.summary()
    assert "a #2 (p0@5) in epoch 1, whose other records of the key are in p2" in verdict.examples


def test_duplicates_missing_and_unknown_keys_are_counted() -> None:
    records = [StoredRecord(0, 0, "a", 0), StoredRecord(0, 1, "a", 0), StoredRecord(0, 2, "a", 2)]
    verdict = check_topic("t", records, (), {"a": 4, "b": 1})
    assert (verdict.duplicates, verdict.missing, verdict.expected) == (1, 3, 5)
    without_source = check_topic("t", [*records, StoredRecord(1, 0, "z", 0)], (), None, unreadable=2)
    assert without_source.missing == 1 and without_source.unreadable == 2 and not without_source.ok
    assert "the source does not have" in check_topic("t", records, (), {"b": 1}).examples[-1]


def test_decode_record_knows_the_numbered_and_the_source_formats() -> None:
    assert decode_record(b'{"k": "p0-k1", "s": 7}') == ("p0-k1", 7)
    assert decode_record(b'{"p": 3, "seq": 9, "member": "m"}') == ("src-3", 9)
    assert decode_record(b"not json") is None and decode_record(b'{"x": 1}') is None


# --- the report ---------------------------------------------------------------------------------


def _report(**changes: object) -> SandboxReport:
    from ordo.verify import TopicVerdict

    stages = [StageOutcome(step, 10.0 * i, 1.5, "done") for i, step in enumerate(Step)]
    report = SandboxReport(
        duration=60, members=3, orders=100,
        kafka=TopicVerdict("orders", records=100, keys=10, partitions=8, epochs=2, expected=100),
        consumers=Verdict(delivered=100, processed=100), stages=stages,
        expansion_seconds=1.2, fence_wait_seconds=0.4, longest_stall=0.8,
    )  # fmt: skip
    for name, value in changes.items():
        setattr(report, name, value)
    return report


def test_a_clean_run_passes_every_check() -> None:
    report = _report()
    assert report.ok and all(c.ok for c in checks(report))
    data = report.to_json()
    assert data["ok"] is True and data["kafka"]["records"] == 100 and len(data["checks"]) == 4 + len(Step)
    json.dumps(data, default=str)


@pytest.mark.parametrize(
    "change",
    [
        {"kafka_missing": 1}, {"kafka_duplicates": 1}, {"kafka_order_violations": 1},
        {"consumers_lost": 1}, {"consumers_order_violations": 2}, {"stage_missing": Step.EXPAND},
        {"stage_failed": Step.KILL_MEMBER}, {"spark": SparkOutcome(100, 99, 0, 0)},
        {"spark": SparkOutcome(100, 100, 0, 1)},
    ],
)  # fmt: skip
def test_any_failed_check_fails_the_run(change: dict[str, object]) -> None:
    report = _report()
    for name, value in change.items():
        if name.startswith("kafka_"):
            setattr(report.kafka, name.removeprefix("kafka_"), value)
        elif name.startswith("consumers_"):
            setattr(report.consumers, name.removeprefix("consumers_"), value)
        elif name == "stage_missing":
            report.stages = [s for s in report.stages if s.step != value]
        elif name == "stage_failed":
            report.stages = [StageOutcome(s.step, s.started, None, "timed out") if s.step == value else s
                             for s in report.stages]  # fmt: skip
        else:
            setattr(report, name, value)
    assert not report.ok


def test_orders_the_consumers_never_processed_are_named_with_their_place_in_kafka() -> None:
    report = _report(lost_at=["k1 #4 at p3@812"])
    report.consumers.lost = 1
    detail = next(c for c in checks(report) if c.name == "consumers lost nothing")
    assert not detail.ok and detail.detail == "1 orders never processed: k1 #4 at p3@812"


def test_redeliveries_to_consumers_do_not_fail_the_run() -> None:
    report = _report()
    report.consumers.duplicates = 5  # consumers are at-least-once; Kafka holds each order once
    assert report.ok


def test_the_report_table_shows_the_numbers_and_the_checks() -> None:
    console = Console(width=140, record=True)
    console.print(render(_report(spark_skipped="--no-spark")))
    text = console.export_text()
    assert "orders written to the source" in text and "skipped: --no-spark" in text
    assert "✓ expansion completed" in text and "✗" not in text


# --- the live view and its readers ---------------------------------------------------------------


def test_the_view_renders_members_topic_and_counters() -> None:
    snap = Snapshot(
        elapsed=12.5, generation=4, partitions=8, epoch=1, expansion="Completed (4 → 8)",
        members=[MemberRow("orders-cdc-0", (0, 1, 2), 4), MemberRow("orders-cdc-3", state="killed")],
        gates_closed={"consumer-0": 2}, source_orders=1234, consumed=1200, distinct=1200, stalled_for=0.7,
        spark_rows=1000, events=["  1.0 s  started"],
    )  # fmt: skip
    console = Console(width=160, record=True)
    console.print(render_view(snap))
    text = console.export_text()
    for expected in ("generation 4", "0, 1, 2", "killed", "fenced for 0.7 s", "2 (consumer-0: 2)", "1,234"):
        assert expected in text


def test_log_tail_returns_only_complete_new_lines(tmp_path: Path) -> None:
    path = tmp_path / "log"
    tail = LogTail(path)
    assert tail.lines() == []
    path.write_text("a\nb")
    assert tail.lines() == ["a"]
    with path.open("a") as f:
        f.write("c\nd\n")
    assert tail.lines() == ["bc", "d"] and tail.lines() == []


def test_live_order_checks_records_merged_by_time_once_they_are_old_enough() -> None:
    live = LiveOrder(lag_ns=10)
    live.feed("c0", ["5 a 1 0 1", "bad line"])
    live.feed("c1", ["3 a 0 1 0"])
    live.advance(now_ns=14)  # only the record stamped 3 is old enough
    assert (live.check.records, live.consumed) == (1, 2)
    live.advance(now_ns=100)
    assert live.check.order_violations == 0 and live.check.distinct == 2
    live.feed("c0", ["200 a 0 0 0"])
    live.advance(now_ns=1000)
    assert live.check.duplicates == 1


def test_closed_gates_and_slow_units_are_read_from_program_output() -> None:
    assert closed_gates(["x", "closed gates: {4: {0: 12}, 5: {1: 3}}", "closed gates: {}"]) == 0
    assert closed_gates(["closed gates: {4: {0: 12}}"]) == 1 and closed_gates(["nothing"]) is None
    lines = ['{"event": "slow", "seconds": 0.8}', '{"event": "rebalance"}', "%5|noise"]
    assert slow_units(lines) == [0.8]


def test_names_derived_from_a_topic_are_valid_kubernetes_names_and_keep_topics_apart() -> None:
    import re

    label = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
    assert resource_prefix("orders") == "orders"  # a name Kubernetes takes stays as it is
    names = {t: resource_prefix(t) for t in ("orders_1", "orders-1", "Orders.1", "_", "x" * 249)}
    assert len(set(names.values())) == len(names)
    for topic, prefix in names.items():
        member = f"{prefix}-cdc-12"
        assert label.fullmatch(member) and len(member) <= 63, (topic, member)
    assert topic_name_problem("orders_1.v2") is None
    assert topic_name_problem("x" * 250) is not None


# --- the command ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--duration", "5"], "--duration must be at least"),
        (["--members", "0"], "--members must be at least 1"),
        (["--rate", "0"], "--rate must be positive"),
        (["--kubeconfig", "/nope"], "--kubeconfig needs --bootstrap"),
        (["--kubeconfig", "/nope", "--bootstrap", "k:9092"], "--kubeconfig: no file /nope"),
        (["--operator", "cluster"], "are for a real cluster: give --kubeconfig too"),
        (["--pod-image", "pause"], "are for a real cluster: give --kubeconfig too"),
        (["--report", "/no/such/dir/r.json"], "does not exist"),
        (["--topic", "orders/1"], "is not a Kafka topic name"),
        (["--topic", ".."], "is not a Kafka topic name"),
        (["-X", "security.protocol=SSL"], "-X and --command-config are for a real Kafka: give --bootstrap"),
        (["-X", "security.protocol"], "-X: expected key=value"),
        (["--bootstrap", "k:9092", "--command-config", "/no/such.properties"], "cannot read /no/such"),
    ],
)
def test_bad_options_are_one_clear_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ordo(["sandbox", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
