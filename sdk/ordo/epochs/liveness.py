"""Producer liveness from the producer registry (``__ordo_producers``): what each ordo producer
reports, pure, and ``ProducerLiveness``, the operator's reader of it.

Key: the producer id. Value: the producer's latest report. The operator reads it to know which
producers are live and which acknowledged a fence; the SDK ignores records that fail validation
(anyone with write access to the topic could write garbage), and so does the operator, with a log
line naming the record.

Liveness is judged by when the reader *received* a report, on its own monotonic clock, never by the
wall-clock stamp in the report: a producer whose clock is minutes off would otherwise be counted
gone while it reports (and a fence would not wait for it) or live long after it died.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._compacted import CompactedTopicReader

__all__ = [
    "DEFAULT_DELIVERY_TIMEOUT_MS",
    "ProducerLiveness",
    "ProducerReport",
    "RegistryError",
    "live_reports",
    "parse_report",
    "silent_reports",
    "stragglers",
]

HeardReport = tuple["ProducerReport", float]
"""A report and the reader's ``time.monotonic()`` when it arrived."""
DEFAULT_DELIVERY_TIMEOUT_MS = 0
"""A report without a delivery timeout (an earlier ordo's producer, which did not bound its queue
by its session either) is judged by its session alone, as before."""


class RegistryError(ValueError):
    """A registry record that is not a valid report; the message names the record."""


class ProducerReport(BaseModel):
    """One producer's latest liveness report."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    producer_id: str = Field(min_length=1, max_length=256)
    topics: tuple[str, ...] = Field(description="Topics this producer writes with ordo's partitioning.")
    partitioner: str = Field(default="murmur2", description="murmur2, round_robin or explicit.")
    epochs: dict[str, int] = Field(default_factory=dict, description="topic → epoch it produces with.")
    fenced: dict[str, int] = Field(default_factory=dict, description="topic → fence epoch it acknowledged.")
    partitions: dict[str, int] = Field(
        default_factory=dict, description="topic → the partition count it places records by."
    )
    session_timeout_ms: int = Field(ge=100, le=3_600_000)
    reported_at_ms: int = Field(
        ge=0, description="The producer's wall-clock time of the report (Unix ms), for people only."
    )
    closed: bool = Field(default=False, description="The producer closed cleanly and is gone.")
    delivery_timeout_ms: int = Field(
        default=DEFAULT_DELIVERY_TIMEOUT_MS,
        ge=0,
        le=2_147_483_647,
        description="Its librdkafka message.timeout.ms: a record it queued is written or failed "
        "within this long of being queued.",
    )
    transactional_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=512,
        description="The transactional.id its records are written under (fencing=broker): the "
        "operator fences a producer that does not acknowledge a fence with InitProducerId of this "
        "id, and the broker refuses its writes from then on. None: it cannot be fenced so (lease).",
    )

    def live(self, heard_at: float, now: float) -> bool:
        """Live if not closed and received within its session, both times on the reader's
        monotonic clock."""
        return not self.closed and now - heard_at <= self.session_timeout_ms / 1000

    def may_write_for(self, heard_at: float, now: float, margin: float) -> float:
        """Seconds for which records this producer queued may still reach the broker, judged by
        the reader at ``now``: it queues nothing once its session has passed since a report was
        sent (it stops itself), and librdkafka writes or fails a queued record within the delivery
        timeout; ``margin`` covers a request that reaches the broker after its client gave up."""
        if self.closed:
            return 0.0
        until = heard_at + (self.session_timeout_ms + self.delivery_timeout_ms) / 1000 + margin
        return max(0.0, until - now)


def parse_report(key: bytes | None, value: bytes | None) -> ProducerReport | None:
    """A registry record as a report; None for a tombstone. Raises RegistryError when invalid."""
    if value is None:
        return None
    try:
        report = ProducerReport.model_validate_json(value)
    except ValidationError as error:
        raise RegistryError(f"registry record {key!r}: not a valid producer report: {error}") from None
    if key is not None and key.decode(errors="replace") != report.producer_id:
        raise RegistryError(f"registry record {key!r}: key does not match producer_id {report.producer_id!r}")
    return report


def live_reports(heard: Iterable[HeardReport], topic: str, now: float) -> Mapping[str, ProducerReport]:
    """The live producers of ``topic``, by id, judged at ``now`` (the reader's monotonic clock)."""
    return {r.producer_id: r for r, at in heard if topic in r.topics and r.live(at, now)}


def silent_reports(
    heard: Iterable[HeardReport], topic: str, epoch: int, now: float
) -> Mapping[str, ProducerReport]:
    """Producers of ``topic`` that fell silent without closing or acknowledging the fence of
    ``epoch``, however long ago: a process paused (SIGSTOP, a frozen VM whose clocks do not count
    the pause) may wake at any time with records queued by the partition count it had."""
    return {
        report.producer_id: report
        for report, at in heard
        if topic in report.topics
        and not report.closed
        and not report.live(at, now)
        and report.fenced.get(topic, -1) < epoch
    }


def stragglers(
    heard: Iterable[HeardReport], topic: str, epoch: int, now: float, margin: float
) -> Mapping[str, float]:
    """Producers of ``topic`` that fell silent without closing or acknowledging the fence of
    ``epoch``, that Kafka cannot fence (no transactional id: fencing=lease, or an earlier ordo),
    and whose queued records may still land (by id: seconds left). Such a process paused (SIGSTOP,
    a VM or node freeze) or cut off with records in librdkafka's queue sends them when it resumes,
    by the partition count it had: the thresholds must be read after them."""
    found: dict[str, float] = {}
    for report, at in heard:
        if (
            topic not in report.topics
            or report.live(at, now)
            or report.fenced.get(topic, -1) >= epoch
            or report.transactional_id is not None
        ):
            continue
        left = report.may_write_for(at, now, margin)
        if left > 0:
            found[report.producer_id] = left
    return found


class ProducerLiveness(CompactedTopicReader[ProducerReport]):
    """A background reader of the producer registry: which producers are live and which
    acknowledged a fence (the operator's view of producers)."""

    def parse(self, key: str, value: bytes) -> ProducerReport:
        report = parse_report(key.encode(), value)
        assert report is not None  # tombstones never reach parse
        return report

    def live(self, topic: str) -> Mapping[str, ProducerReport]:
        """The producers of ``topic`` whose latest report this reader received within their
        session. A reader that just started received everything now: a producer that died
        silently counts as live for one more session (a fence waits longer; it never skips a
        producer that reports)."""
        return live_reports(self.heard().values(), topic, time.monotonic())

    def counts(self) -> dict[str, dict[str, int]]:
        """topic → live producer → the partition count it reports placing records by."""
        now = time.monotonic()
        found: dict[str, dict[str, int]] = {}
        for report, at in self.heard().values():
            if report.live(at, now):
                for topic, count in report.partitions.items():
                    found.setdefault(topic, {})[report.producer_id] = count
        return found

    def silent(self, topic: str, epoch: int) -> Mapping[str, ProducerReport]:
        """``silent_reports`` of what this reader received."""
        return silent_reports(self.heard().values(), topic, epoch, time.monotonic())

    def stragglers(self, topic: str, epoch: int, margin: float) -> Mapping[str, float]:
        """``stragglers`` of what this reader received (a reader that just started received
        everything now: a producer gone before it started is waited for once more)."""
        return stragglers(self.heard().values(), topic, epoch, time.monotonic(), margin)
