"""Where reads start and end, pure: offsets from timestamps (``startingTimestamp``,
``endingOffsetsByTimestamp``, ...), a batch read's end (``endingOffsets``), and a batch read
planned as the stream would read the same range.

A batch read gives exactly the records the stream would give for the range, in the stream's
order: ``plan_batch`` is applied from the start until it makes no progress, each step a round
(what one micro-batch would read), and the DataFrame's partitions are the rounds' slices in
order. So ``collect()`` returns every key's records in order, and a gate that cannot open inside
the range (``endingOffsets`` ends a prior partition before its threshold) is an error, not
records silently left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ordo.epochs import EpochHistory

from .options import LATEST, EndingOffsets, StartingTimes
from .planning import Offsets, Slice, Watermarks, available_now_target, plan_batch, slices

__all__ = ["BatchRead", "ending_offsets", "offsets_at_times", "plan_batch_read", "timestamp_requests"]

Marks = Mapping[str, Mapping[int, Watermarks]]


@dataclass(frozen=True)
class BatchRead:
    rounds: tuple[tuple[Slice, ...], ...]
    """What each micro-batch of the stream would read, in order."""
    lost: tuple[str, ...] = ()
    """What was skipped with failOnDataLoss=false, one line per partition."""

    @property
    def pieces(self) -> list[Slice]:
        return [piece for round_ in self.rounds for piece in round_]


def timestamp_requests(times: StartingTimes, marks: Marks, option: str) -> Offsets:
    """The timestamp to look up per partition: one for every partition read, or those given."""
    if isinstance(times, int):
        return {t: dict.fromkeys(parts, times) for t, parts in marks.items()}
    for topic, parts in times.items():
        unknown = sorted(set(parts) - set(marks.get(topic, {})))
        if unknown:
            raise RuntimeError(
                f"ordo-kafka: option {option} names partitions {unknown} of {topic!r}, which the "
                f"query does not read (partitions: {sorted(marks.get(topic, {}))})"
            )
    return {t: dict(parts) for t, parts in times.items() if t in marks}


def offsets_at_times(
    requests: Offsets,
    found: Offsets,
    marks: Marks,
    *,
    when_none: Literal["error", "latest"],
    option: str,
) -> Offsets:
    """Offsets for timestamps: ``found`` is Kafka's answer (the first offset whose timestamp is at
    or after the requested one, -1 when there is none). With none, the partition's end, or an
    error (Spark's startingOffsetsByTimestampStrategy)."""
    result: Offsets = {}
    for topic, parts in requests.items():
        result[topic] = {}
        for p, millis in parts.items():
            offset = found.get(topic, {}).get(p, -1)
            if offset < 0:
                if when_none == "error":
                    raise RuntimeError(
                        f"ordo-kafka: {topic}-{p} has no record with a timestamp at or after {millis} "
                        f"(option {option}); set startingOffsetsByTimestampStrategy=latest to start "
                        "such partitions at their end"
                    )
                offset = marks[topic][p].high
            result[topic][p] = offset
    return result


def ending_offsets(
    ending: EndingOffsets | Offsets, marks: Marks, histories: Mapping[str, EpochHistory | None]
) -> Offsets:
    """A batch read's end: latest (every partition's end, and every epoch threshold, like
    Trigger.AvailableNow), or per partition (-1 = latest; partitions not named end at latest)."""
    latest = available_now_target(marks, histories)
    if ending == "latest":
        return latest
    result = {t: dict(parts) for t, parts in latest.items()}
    for topic, parts in ending.items():
        for p, offset in parts.items():
            if p not in result.get(topic, {}):
                raise RuntimeError(
                    f"ordo-kafka: option endingOffsets names {topic}-{p}, which the query does not "
                    f"read (partitions: {sorted(result.get(topic, {}))})"
                )
            result[topic][p] = latest[topic][p] if offset == LATEST else offset
    return result


def plan_batch_read(
    start: Offsets,
    end: Offsets,
    marks: Marks,
    histories: Mapping[str, EpochHistory | None],
    *,
    gate: bool,
    fail_on_data_loss: bool,
) -> BatchRead:
    """The rounds the stream would read from ``start`` to ``end``; an error when the range asks for
    records that do not exist, or holds records behind a gate it cannot open."""
    for topic, parts in end.items():
        for p, stop in parts.items():
            high = marks[topic][p].high
            if stop > high:
                raise RuntimeError(
                    f"ordo-kafka: endingOffsets asks for {topic}-{p} up to offset {stop}, but the "
                    f"partition ends at {high}"
                )
            first = start.get(topic, {}).get(p, 0)
            if marks[topic][p].low <= first <= high and first > stop:
                raise RuntimeError(
                    f"ordo-kafka: {topic}-{p} starts at offset {first}, past its end {stop} "
                    "(options startingOffsets and endingOffsets)"
                )
    position = {t: dict(parts) for t, parts in start.items()}
    rounds: list[tuple[Slice, ...]] = []
    lost: list[str] = []
    while True:
        plan = plan_batch(
            position,
            marks,
            histories,
            max_records=None,
            gate=gate,
            fail_on_data_loss=fail_on_data_loss,
            target=end,
        )
        lost.extend(plan.lost)
        pieces = slices(position, plan.end, histories if gate else {})
        if not pieces:
            break
        rounds.append(tuple(pieces))
        position = plan.end
    for hold in plan.held:
        if position.get(hold.topic, {}).get(hold.partition, 0) < end[hold.topic][hold.partition]:
            waiting = ", ".join(f"{p} to {o}" for p, o in sorted(hold.gate.waiting_for.items()))
            raise RuntimeError(
                f"ordo-kafka: {hold.topic}-{hold.partition} cannot be read in order past offset "
                f"{hold.offset}: its records of epoch {hold.gate.epoch} wait for partitions "
                f"{waiting} of the topic to be read, and endingOffsets ends them before that. End "
                "those partitions at or past these offsets, or read with gate=false"
            )
    return BatchRead(tuple(rounds), tuple(lost))
