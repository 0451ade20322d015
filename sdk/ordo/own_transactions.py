"""An OrderedProducer's own transactions (``fencing="broker"``, the default): a stale writer is
refused by the broker, whatever the producer's clocks say.

KIP-253 wanted the broker to refuse a write placed by a stale partition count. Kafka has no such
check, but it fences transactional producers: once anyone calls InitProducerId for a
``transactional.id``, the broker aborts that id's open transaction (read_committed readers never
see it) and refuses every later write of the older producer epoch. So every record of an
OrderedProducer that manages no transactions itself goes into a short transaction of its own
``transactional.id`` (``ordo-producer.<producer id>``), committed every ``commit_interval``, by
``flush()`` and ``close()``, and before a fence is acknowledged; the operator fences a producer that
does not acknowledge a fence in time (paused, frozen, cut off) with InitProducerId of that id
instead of waiting out its clocks. The producer, when it wakes, finds itself fenced, opens a new
producer for the id, reads the epoch log again and sends the aborted records again, in order, by
the partition count it finds: nothing is lost and nothing lands by the old count.

Here: the journal of the open transaction (every record as produce() was called; the C path
appends topic, value and key to a flat list), the delivery callbacks held until the commit (so "delivered"
means committed), the records to send again, and what a failed commit calls for
(``after_failure``, pure). The producer's threads apply it under its locks.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from enum import StrEnum
from typing import Any

from confluent_kafka import KafkaError

from .partitioners import murmur2, to_positive

__all__ = [
    "OWN_TRANSACTIONAL_PREFIX",
    "Entry",
    "Journal",
    "Remedy",
    "Report",
    "after_failure",
    "fail_all",
    "own_transactional_id",
]

OWN_TRANSACTIONAL_PREFIX = "ordo-producer."
"""The prefix of the transactional ids OrderedProducers take for their own transactions (ACLs:
the producers need Write and Describe on it, the operator Write, to fence them)."""

Entry = tuple[Any, ...]
"""A record to send again: ``(topic, value, key)`` of the C path, produce()'s arguments
``(topic, value, key, partition, on_delivery, timestamp, headers)``, or a ``write_beside`` record
``(topic, value, key, partition, on_delivery)`` (its own partition, no placement)."""
DeliveryCallback = Callable[[KafkaError | None, Any], None]
Report = tuple[DeliveryCallback, KafkaError | None, Any]


def own_transactional_id(producer_id: str) -> str:
    return f"{OWN_TRANSACTIONAL_PREFIX}{producer_id}"


class Remedy(StrEnum):
    """What a failed commit (or a fatal error anywhere) calls for."""

    RETRY = "retry"
    """Call commit again: it timed out or the coordinator was busy; the transaction is intact."""
    RESEND = "resend"
    """Abort the transaction and send its records again (e.g. a record failed, the coordinator
    timed the transaction out)."""
    RENEW = "renew"
    """The producer is unusable (fenced by InitProducerId, or another fatal error): open a new
    one for the same id, read the epoch log again, then send the records again."""


def after_failure(error: KafkaError) -> Remedy:
    """What a failed ``commit_transaction`` (or a fatal error reported elsewhere) calls for."""
    if error.fatal() or error.code() in (KafkaError._FENCED, KafkaError._FATAL):
        return Remedy.RENEW
    if error.txn_requires_abort():
        return Remedy.RESEND
    if error.retriable() or error.code() == KafkaError._TIMED_OUT:
        return Remedy.RETRY
    return Remedy.RESEND


class Journal:
    """The open transaction's records, its held delivery reports, and the records of aborted
    transactions still to send again. ``entries`` is the flat list the C path appends to, three
    items a record (topic, value, key; a Python-path record puts its whole ``Entry`` first and two
    Nones): cleared in place, never replaced. Call with the producer's gate held (the C path
    runs under the GIL)."""

    def __init__(self) -> None:
        self.entries: list[Any] = []
        self.pending: list[Any] = []
        """Records taken while the transaction commits (topic, value, key, partition each): the
        C path's buffer, handed over (and journaled) once the next transaction begins."""
        self.resend: deque[Entry] = deque()
        """Records of aborted transactions, oldest first, not handed over again yet."""
        self.generation = 0
        """Counts aborts: a held report of an earlier generation is stale (its record is sent again)."""
        self._reports: list[Report] = []
        self._reports_lock = threading.Lock()  # delivery reports arrive on whichever thread polls

    def __len__(self) -> int:
        """Records handed to produce() and not committed yet."""
        return len(self.entries) // 3 + len(self.pending) // 4 + len(self.resend)

    def record(self, entry: Entry) -> None:
        """A record the Python path handed over joins the open transaction."""
        self.entries.extend((entry, None, None))

    def holds(self, topics: Collection[str], fences: Mapping[str, tuple[int, int]] | None = None) -> bool:
        """Whether a record of one of ``topics`` is handed over (or taken) and not committed.
        ``fences``: topic -> (old, new) count of a fence whose staying records (murmur2 keys the
        two counts place alike, keyless ones: ``ordo.fence``) do not count: they may land after
        the thresholds. A record with a partition of its own always counts."""
        fences = fences or {}

        def binding(topic: str, key: Any, partition: Any) -> bool:
            counts = fences.get(topic)
            if counts is None or partition is not None:
                return topic in topics
            if key is None:
                return False
            h = to_positive(murmur2(key if key.__class__ is bytes else str(key).encode()))
            return h % counts[0] != h % counts[1]

        flat, taken = self.entries, self.pending
        for i in range(0, len(flat), 3):
            entry = flat[i]
            if entry.__class__ is tuple:
                if entry[0] in topics and binding(entry[0], entry[2], entry[3]):
                    return True
            elif entry in topics and binding(entry, flat[i + 2], None):
                return True
        # the C path's (topic, value, key, chosen partition): murmur2-placed, so judged by key
        return any(
            taken[i] in topics and binding(taken[i], taken[i + 2], None) for i in range(0, len(taken), 4)
        )

    def open_records(self) -> list[Entry]:
        """The open transaction's records, oldest first."""
        flat = self.entries
        return [
            flat[i] if flat[i].__class__ is tuple else (flat[i], flat[i + 1], flat[i + 2])
            for i in range(0, len(flat), 3)
        ]

    def hold(
        self, callback: Callable[[KafkaError | None, Any], None]
    ) -> Callable[[KafkaError | None, Any], None]:
        """A delivery callback that holds ``callback``'s report until the transaction commits."""
        generation = self.generation

        def held(error: KafkaError | None, message: Any) -> None:
            with self._reports_lock:
                if generation == self.generation:
                    self._reports.append((callback, error, message))

        return held

    def committed(self) -> list[Report]:
        """The transaction committed: its records are written; the held reports to deliver."""
        self.entries.clear()
        with self._reports_lock:
            reports, self._reports = self._reports, []
        return reports

    def aborted(self) -> None:
        """The transaction was aborted (or its producer fenced): every record of it, and those
        taken while it committed, are to be sent again, before the older ones still waiting; held
        reports are dropped (each record gets one when it is written again)."""
        with self._reports_lock:
            self.generation += 1
            self._reports.clear()
        taken = self.pending
        again = [
            *self.open_records(),
            *((taken[i], taken[i + 1], taken[i + 2]) for i in range(0, len(taken), 4)),
        ]
        self.resend.extendleft(reversed(again))
        self.entries.clear()
        taken.clear()

    def give_up(self) -> list[Entry]:
        """Every record not committed, taken out (the producer closes without writing them)."""
        self.aborted()
        lost = list(self.resend)
        self.resend.clear()
        return lost


def fail_all(entries: Iterable[Entry], error: KafkaError) -> int:
    """Report ``error`` to each record's delivery callback (those that have one); how many had none."""
    silent = 0
    for entry in entries:
        callback = entry[4] if len(entry) > 4 else None  # produce()'s and write_beside's
        if callback is None:
            silent += 1
        else:
            callback(error, None)
    return silent
