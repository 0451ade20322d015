"""Which partitions the ``ordo-kafka`` source reads: Spark's ``subscribe``, ``subscribePattern``
or ``assign`` (exactly one), resolved against the broker's topics at every plan. Pure.

``assign`` is refused with the gate on: the gate holds a partition until the partitions its keys
came from are read up to a threshold, and partitions outside the assignment are never read, so
the gate would never open (and after an expansion the moved keys' records go to partitions the
assignment does not have).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ordo.errors import ConfigError

__all__ = ["Subscription"]

_SUBSCRIBE_OPTIONS = ("subscribe", "subscribepattern", "assign")


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def parse(cls, lowered: Mapping[str, str], *, gate: bool) -> Subscription:
        given = [name for name in _SUBSCRIBE_OPTIONS if name in lowered]
        if len(given) != 1:
            raise ConfigError(
                "ordo-kafka: give exactly one of the options subscribe (comma-separated topics), "
                f"subscribePattern (a regular expression) or assign (JSON), got {len(given)}"
            )
        if "subscribe" in lowered:
            topics = tuple(t.strip() for t in lowered["subscribe"].split(",") if t.strip())
            if not topics:
                raise ConfigError("ordo-kafka: option subscribe needs comma-separated topic names")
            return cls(topics=topics)
        if "subscribepattern" in lowered:
            pattern = lowered["subscribepattern"].strip()
            try:
                re.compile(pattern)
            except re.error as error:
                raise ConfigError(
                    f"ordo-kafka: option subscribePattern is not a regular expression ({error}): {pattern!r}"
                ) from None
            if not pattern:
                raise ConfigError("ordo-kafka: option subscribePattern needs a regular expression")
            return cls(pattern=pattern)
        if gate:
            raise ConfigError(
                "ordo-kafka: option assign needs gate=false: the ordering gate waits for the "
                "partitions a key came from, which an assignment may leave out, and after an "
                "expansion a key's new records land in partitions outside it. Use subscribe (or "
                "subscribePattern) to read in order, or set gate=false to read exactly these "
                "partitions without ordering across expansions"
            )
        return cls(assigned=_assignment(lowered["assign"]))

    @property
    def option(self) -> str:
        return "subscribe" if self.topics else "subscribePattern" if self.pattern else "assign"

    @property
    def named_topics(self) -> tuple[str, ...]:
        return self.topics or tuple(self.assigned)

    def check_named(self, option: str, topic: str) -> None:
        """An offsets or timestamps option may only name topics this subscription reads."""
        if self.pattern is not None:
            if not self.matches(topic):
                raise ConfigError(
                    f"ordo-kafka: option {option} names {topic!r}, which subscribePattern "
                    f"{self.pattern!r} does not match"
                )
        elif topic not in self.named_topics:
            raise ConfigError(
                f"ordo-kafka: option {option} names {topic!r}, which is not in {self.option} "
                f"{self.named_topics}"
            )

    def matches(self, topic: str) -> bool:
        """Whole-name match, as Java's Pattern.matches in Spark; internal topics (``__*``, Kafka's
        and ordo's own) never match."""
        assert self.pattern is not None
        return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None

    def select(self, available: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
        """Topic -> partitions to read, given the broker's topics (name -> partition count)."""
        if self.pattern is not None:
            return {t: tuple(range(n)) for t, n in sorted(available.items()) if self.matches(t)}
        for topic in self.named_topics:
            if not available.get(topic):
                raise RuntimeError(
                    f"ordo-kafka: topic {topic!r} (option {self.option}) does not exist or has no partitions"
                )
        if self.topics:
            return {t: tuple(range(available[t])) for t in self.topics}
        for topic, partitions in self.assigned.items():
            missing = [p for p in partitions if p >= available[topic]]
            if missing:
                raise RuntimeError(
                    f"ordo-kafka: option assign names partitions {missing} of {topic!r}, which has "
                    f"{available[topic]}"
                )
        return {t: tuple(ps) for t, ps in self.assigned.items()}


def _assignment(text: str) -> dict[str, tuple[int, ...]]:
    problem = f'ordo-kafka: option assign must be JSON like {{"orders": [0, 1]}}, got {text!r}'
    try:
        raw = json.loads(text.strip())
    except json.JSONDecodeError:
        raise ConfigError(problem) from None
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(problem)
    result: dict[str, tuple[int, ...]] = {}
    for topic, partitions in raw.items():
        if not isinstance(partitions, list) or not partitions:
            raise ConfigError(problem)
        if not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions):
            raise ConfigError(problem)
        result[topic] = tuple(sorted(set(partitions)))
    return result
