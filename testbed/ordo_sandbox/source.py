"""The sandbox's source: a SQLite ``orders`` table in source partitions, as in KIP-509's example.

Each order belongs to a customer; a customer's orders all live in one source partition
(``customer number mod partitions``) and carry the customer's running number ``seq`` (0, 1, 2, ...),
so per-key order in Kafka can be checked against the source. ``last_change_ts`` is a fixed-width
UTC timestamp that grows strictly: there is one writer, it stamps each row when it inserts it and
commits in stamping order, so a reader that saw a timestamp has seen every row stamped before it.
That makes ``last_change_ts`` a correct restart checkpoint: a member copies the rows of its source
partition after the checkpoint, in timestamp order.
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

__all__ = [
    "Order",
    "OrderWriter",
    "WriterThread",
    "connect",
    "create",
    "customer_name",
    "orders_after",
    "source_counts",
    "source_partition",
    "timestamp",
]

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    id INTEGER PRIMARY KEY,
    src INTEGER NOT NULL,
    customer TEXT NOT NULL,
    seq INTEGER NOT NULL,
    amount_cents INTEGER NOT NULL,
    last_change_ts TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS orders_by_change ON orders (src, last_change_ts);
"""


@dataclass(frozen=True)
class Order:
    id: int
    src: int
    customer: str
    seq: int
    amount_cents: int
    last_change_ts: str

    def value(self, member: str) -> bytes:
        """The Kafka record value: ``k``/``s`` (key and its number, what verifiers and the Spark
        pipeline read) plus the order's own fields and the member that copied it."""
        body = {"k": self.customer, "s": self.seq, "order": self.id, "src": self.src,
                "amount_cents": self.amount_cents, "ts": self.last_change_ts, "member": member}  # fmt: skip
        return json.dumps(body, separators=(",", ":")).encode()


def customer_name(number: int) -> str:
    return f"customer-{number:04d}"


def source_partition(customer: int, partitions: int) -> int:
    return customer % partitions


def timestamp(micros: int) -> str:
    """Fixed width, so text order is time order: ``2026-11-22T12:34:00.123456Z``."""
    return datetime.fromtimestamp(micros / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def connect(path: Path) -> sqlite3.Connection:
    # explicit transactions; the writer's connection is made by one thread and used by another
    connection = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA busy_timeout = 30000")
    return connection


def create(path: Path) -> None:
    with closing(connect(path)) as connection:
        connection.execute("PRAGMA journal_mode = WAL")  # readers do not block the writer
        connection.executescript(SCHEMA)


def orders_after(connection: sqlite3.Connection, src: int, checkpoint: str | None, limit: int) -> list[Order]:
    """Up to ``limit`` orders of source partition ``src`` changed after ``checkpoint``, oldest first."""
    rows = connection.execute(
        "SELECT id, src, customer, seq, amount_cents, last_change_ts FROM orders "
        "WHERE src = ? AND last_change_ts > ? ORDER BY last_change_ts LIMIT ?",
        (src, checkpoint or "", limit),
    ).fetchall()
    return [Order(*row) for row in rows]


def last_changes(path: Path) -> dict[int, str]:
    """Source partition → its latest ``last_change_ts``."""
    with closing(connect(path)) as connection:
        rows = connection.execute("SELECT src, MAX(last_change_ts) FROM orders GROUP BY src").fetchall()
    return {src: ts for src, ts in rows}


def source_counts(path: Path) -> dict[str, int]:
    """Customer → how many orders it has (numbers 0..n-1): what the verifier expects in the topic,
    each once (``ordo verify --source orders.db``)."""
    with closing(connect(path)) as connection:
        rows = connection.execute("SELECT customer, COUNT(*) FROM orders GROUP BY customer").fetchall()
    return {customer: count for customer, count in rows}


class OrderWriter:
    """The table's only writer: inserts orders for random customers, each stamped later than the last."""

    def __init__(self, path: Path, partitions: int, customers: int, seed: int = 509) -> None:
        self.partitions, self.customers = partitions, customers
        self.connection = connect(path)
        self.rng = random.Random(seed)
        self.inserted = 0
        self._last = 0
        self._next_seq: dict[str, int] = dict(
            self.connection.execute("SELECT customer, MAX(seq) + 1 FROM orders GROUP BY customer").fetchall()
        )

    def insert(self, count: int) -> int:
        """Insert ``count`` orders in one transaction; returns how many there are in all."""
        rows = []
        for _ in range(count):
            number = self.rng.randrange(self.customers)
            customer = customer_name(number)
            seq = self._next_seq.get(customer, 0)
            self._next_seq[customer] = seq + 1
            self._last = max(self._last + 1, time.time_ns() // 1000)
            src = source_partition(number, self.partitions)
            rows.append((src, customer, seq, self.rng.randrange(100, 100_000), timestamp(self._last)))
        with self._transaction():
            self.connection.executemany(
                "INSERT INTO orders (src, customer, seq, amount_cents, last_change_ts) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )
        self.inserted += count
        return self.inserted

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")

    def close(self) -> None:
        self.connection.close()


class WriterThread(threading.Thread):
    """Inserts ``rate`` orders per second, ten small transactions a second, until stopped."""

    def __init__(self, writer: OrderWriter, rate: float) -> None:
        super().__init__(name="orders-writer", daemon=True)
        self.writer, self.rate = writer, rate
        self.halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        started = time.monotonic()
        try:
            while not self.halt.wait(0.1):  # pacing the inserts, not synchronising
                due = int((time.monotonic() - started) * self.rate) - self.writer.inserted
                if due > 0:
                    self.writer.insert(due)
        except BaseException as error:  # reported by the sandbox; a dead writer must not pass silently
            self.error = error
        finally:
            self.writer.close()

    def stop(self) -> int:
        """Stop inserting; returns how many orders were inserted."""
        self.halt.set()
        self.join(30)
        return self.writer.inserted
