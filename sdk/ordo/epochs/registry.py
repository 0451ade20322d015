"""The producer registry (``__ordo_producers``): what each ordo producer reports, pure.

Key: the producer id. Value: the producer's latest report. The operator reads it to know which
producers are live and which acknowledged a fence; the SDK ignores records that fail validation
(anyone with write access to the topic could write garbage), and so does the operator, with a log
line naming the record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._tail import CompactedTopicReader

__all__ = ["ProducerRegistry", "ProducerReport", "RegistryError", "live_reports", "parse_report"]


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
    session_timeout_ms: int = Field(ge=100, le=3_600_000)
    reported_at_ms: int = Field(ge=0, description="Wall-clock time of the report (Unix ms).")
    closed: bool = Field(default=False, description="The producer closed cleanly and is gone.")

    def live(self, now_ms: int) -> bool:
        return not self.closed and now_ms - self.reported_at_ms <= self.session_timeout_ms


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


def live_reports(reports: Iterable[ProducerReport], topic: str, now_ms: int) -> Mapping[str, ProducerReport]:
    """The live producers of ``topic``, by id."""
    return {r.producer_id: r for r in reports if topic in r.topics and r.live(now_ms)}


class ProducerRegistry(CompactedTopicReader[ProducerReport]):
    """A background reader of the producer registry (the operator's view of producers)."""

    def parse(self, key: str, value: bytes) -> ProducerReport:
        report = parse_report(key.encode(), value)
        assert report is not None  # tombstones never reach parse
        return report

    def live(self, topic: str, now_ms: int) -> Mapping[str, ProducerReport]:
        return live_reports(self.snapshot().values(), topic, now_ms)
