"""ordo.own_transactions without a broker: the journal's order through aborts, held delivery
reports, and what a failed commit calls for."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError
from hypothesis import given
from hypothesis import strategies as st

from ordo.own_transactions import Journal, Remedy, after_failure, fail_all, own_transactional_id


def _c_path(journal: Journal, topic: str, value: bytes, key: bytes) -> None:
    journal.entries.extend((topic, value, key))  # what _fastproduce.c appends


def _taken(journal: Journal, topic: str, value: bytes, key: bytes, partition: int) -> None:
    journal.pending.extend((topic, value, key, partition))  # what it takes while a commit runs


def test_an_abort_sends_the_transaction_again_before_what_was_taken_during_its_commit() -> None:
    journal = Journal()
    _c_path(journal, "t", b"1", b"k")
    callback = print
    journal.record(("t", b"2", b"k", None, callback, 0, None))  # the Python path's whole call
    _taken(journal, "t", b"3", b"k", 4)
    assert len(journal) == 3
    journal.aborted()
    assert list(journal.resend) == [
        ("t", b"1", b"k"),
        ("t", b"2", b"k", None, callback, 0, None),
        ("t", b"3", b"k"),
    ]
    assert not journal.entries and not journal.pending and len(journal) == 3


def test_a_second_abort_keeps_the_older_records_first() -> None:
    journal = Journal()
    _c_path(journal, "t", b"1", b"k")
    journal.aborted()
    journal.resend.popleft()  # sent again: it joins the next transaction
    _c_path(journal, "t", b"1", b"k")
    journal.aborted()
    assert [e[1] for e in journal.resend] == [b"1"]


def _drained(journal: Journal) -> None:
    """What a commit's end does: hand over (journal) what the C path took while it ran."""
    taken = journal.pending
    for i in range(0, len(taken), 4):
        _c_path(journal, taken[i], taken[i + 1], taken[i + 2])
    taken.clear()


@given(st.lists(st.sampled_from(["c", "py", "taken", "abort", "commit"])))
def test_every_record_is_committed_once_in_the_order_it_was_produced(steps: list[str]) -> None:
    """Whatever aborts and commits interleave, the records committed are those produced, once, in
    order, as the producer drives the journal: records of an aborted transaction go again before
    anything new, records taken while a commit runs are handed over when it ends."""
    journal = Journal()
    committed: list[bytes] = []
    produced: list[bytes] = []
    for step in steps:
        if step in ("c", "py", "taken"):
            if step != "taken":
                _drained(journal)  # no commit runs now
            while journal.resend:  # held: records to send again go first
                journal.record(journal.resend.popleft())
            value = str(len(produced)).encode()
            produced.append(value)
            if step == "c":
                _c_path(journal, "t", value, b"k")
            elif step == "py":
                journal.record(("t", value, b"k", None, None, 0, None))
            else:  # a commit runs: the C path takes it
                _taken(journal, "t", value, b"k", 0)
        elif step == "abort":
            journal.aborted()
        else:
            committed.extend(e[1] for e in journal.open_records())
            journal.committed()
            _drained(journal)
    assert committed == produced[: len(committed)]
    journal.aborted()
    assert committed + [e[1] for e in journal.resend] == produced, "nothing lost, nothing twice"


def test_held_reports_arrive_only_after_the_commit_and_not_for_an_aborted_transaction() -> None:
    journal = Journal()
    seen: list[Any] = []

    def note(error: KafkaError | None, message: Any) -> None:
        seen.append(message)

    stale = journal.hold(note)
    stale(None, "aborted")
    journal.aborted()
    fresh = journal.hold(note)
    stale(None, "late report of the aborted one")
    fresh(None, "written again")
    reports = journal.committed()
    assert not seen, "nothing is delivered before the commit"
    for callback, error, message in reports:
        callback(error, message)
    assert seen == ["written again"]


def test_give_up_reports_every_uncommitted_record_that_has_a_callback() -> None:
    journal = Journal()
    failed: list[KafkaError | None] = []
    _c_path(journal, "t", b"1", b"k")
    journal.record(("t", b"2", b"k", None, lambda error, _message: failed.append(error), 0, None))
    lost = journal.give_up()
    assert [e[1] for e in lost] == [b"1", b"2"] and len(journal) == 0
    silent = fail_all(lost, KafkaError(KafkaError._PURGE_QUEUE))
    assert silent == 1 and len(failed) == 1 and failed[0] is not None


def test_holds_says_whether_a_topic_has_uncommitted_records() -> None:
    journal = Journal()
    _c_path(journal, "a", b"1", b"k")
    journal.record(("b", b"2", b"k", None, None, 0, None))
    _taken(journal, "c", b"3", b"k", 0)
    assert journal.holds({"a"}) and journal.holds({"b"}) and journal.holds({"c"})
    assert not journal.holds({"d"})


def test_what_a_failed_commit_calls_for() -> None:
    assert after_failure(KafkaError(KafkaError._FENCED, fatal=True)) == Remedy.RENEW
    assert after_failure(KafkaError(KafkaError.INVALID_PRODUCER_EPOCH, fatal=True)) == Remedy.RENEW
    assert after_failure(KafkaError(KafkaError._MSG_TIMED_OUT, txn_requires_abort=True)) == Remedy.RESEND
    assert after_failure(KafkaError(KafkaError._TIMED_OUT, retriable=True)) == Remedy.RETRY
    assert after_failure(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, retriable=True)) == Remedy.RETRY
    assert after_failure(KafkaError(KafkaError._STATE)) == Remedy.RESEND


def test_the_transactional_id_names_the_producer() -> None:
    assert own_transactional_id("orders-7") == "ordo-producer.orders-7"
