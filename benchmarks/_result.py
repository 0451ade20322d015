from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

# ">= 0.9", "ratio >= 0.8", "<= 1 s", "<= 5 s (session 3 s)": a bound on the ratio when the row
# has a baseline, on the figure itself when it has none
_BOUND = re.compile(r"^(?:ratio )?(>=|<=) ([0-9.]+)(?: [a-z]+)?(?: \(.*\))?$")


class Stopwatch:
    """Wall time and this process's CPU time (every thread of it: the SDK's, librdkafka's, the
    workers') since it was made. The broker is another process: its CPU is not counted."""

    def __init__(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def elapsed(self) -> tuple[float, float]:
        """(wall s, CPU s)."""
        return time.perf_counter() - self._wall, time.process_time() - self._cpu


def alternate(
    blocks: int, sides: Mapping[str, Callable[[int], object]], first: bool
) -> dict[str, tuple[float, float]]:
    """Run ``blocks`` blocks of each side (``sides[name](block)``), the two in turn, the side that
    goes first alternating per pair (the first key leads the first pair when ``first``): each
    side's (wall s, CPU s) summed over its blocks. Blocks of a fraction of a second meet the same
    moments of a shared machine, where a side's whole run met other ones than the other side's."""
    names = list(sides)
    spent = {name: [0.0, 0.0] for name in names}
    for block in range(blocks):
        for name in names if (block % 2 == 0) == first else reversed(names):
            clock = Stopwatch()
            sides[name](block)
            wall, cpu = clock.elapsed()
            spent[name][0] += wall
            spent[name][1] += cpu
    return {name: (wall, cpu) for name, (wall, cpu) in spent.items()}


def per_record(spent: tuple[float, float], records: int) -> tuple[float, float]:
    """(records/s, CPU µs/record) of ``records`` that took ``spent`` (wall s, CPU s)."""
    wall, cpu = spent
    return records / wall, cpu * 1e6 / records


@dataclass(frozen=True)
class Result:
    """One side-by-side measurement: ordo's figure, the baseline's, and the ratio between them.
    ``spread``: the lowest and highest ratio of the rounds the figure is the median of.
    ``cpu_us``: (ordo, baseline) CPU microseconds per record, each side's median over the rounds:
    where a ratio's time goes."""

    name: str
    ordo: float
    baseline: float
    unit: str
    target: str = ""
    spread: tuple[float, float] | None = None
    cpu_us: tuple[float, float] | None = None

    @classmethod
    def absolute(cls, name: str, value: float, unit: str, target: str = "") -> Result:
        """A figure with no baseline to compare with (a latency, a stall)."""
        return cls(name, value, float("nan"), unit, target)

    @classmethod
    def paired(
        cls,
        name: str,
        ordo: Sequence[float],
        baseline: Sequence[float],
        unit: str,
        target: str = "",
        cpu_us: tuple[Sequence[float], Sequence[float]] | None = None,
    ) -> Result:
        """Of rounds measured side by side (ordo[i] beside baseline[i]), the round with the median
        ratio, and the spread of all rounds' ratios. Rates on a shared machine swing between
        rounds, so comparing each side's best would compare different luck; a round shares its
        moment's load. ``cpu_us``: (ordo's, the baseline's) CPU microseconds per record per round."""
        ratios = sorted((o / b, o, b) for o, b in zip(ordo, baseline, strict=True))
        _, median_ordo, median_baseline = ratios[len(ratios) // 2]
        cpu = None if cpu_us is None else (statistics.median(cpu_us[0]), statistics.median(cpu_us[1]))
        return cls(name, median_ordo, median_baseline, unit, target, (ratios[0][0], ratios[-1][0]), cpu)

    @property
    def ratio(self) -> float:
        return self.ordo / self.baseline if self.baseline == self.baseline and self.baseline else float("nan")

    @property
    def ratio_text(self) -> str:
        if self.ratio != self.ratio:
            return "-"
        if self.spread is None:
            return f"{self.ratio:.2f}"
        return f"{self.ratio:.2f} ({self.spread[0]:.2f}-{self.spread[1]:.2f})"

    @property
    def cpu_text(self) -> str:
        """ "ordo / baseline" CPU microseconds per record, and ordo's extra per record."""
        if self.cpu_us is None:
            return "-"
        ours, theirs = self.cpu_us
        return f"{ours:.1f} / {theirs:.1f} ({ours - theirs:+.1f})"

    @property
    def verdict(self) -> str:
        """ "met", "missed", or "unclear" when the rounds' spread lies on both sides of the target
        (a median alone would be luck); "-" for a row without a numeric target."""
        bound = _BOUND.match(self.target)
        if bound is None:
            return "-"
        at_least, limit = bound.group(1) == ">=", float(bound.group(2))
        value = self.ratio if self.ratio == self.ratio else self.ordo
        low, high = self.spread if self.spread is not None and self.ratio == self.ratio else (value, value)

        def meets(x: float) -> bool:
            return x >= limit if at_least else x <= limit

        if meets(low) and meets(high):
            return "met"
        if not meets(low) and not meets(high):
            return "missed"
        return "unclear"

    @property
    def ordo_text(self) -> str:
        return self._text(self.ordo)

    @property
    def baseline_text(self) -> str:
        if self.baseline != self.baseline:  # NaN: no baseline
            return "-"
        return self._text(self.baseline)

    def _text(self, value: float) -> str:
        return f"{value:,.3f} {self.unit}" if value < 100 else f"{value:,.0f} {self.unit}"
