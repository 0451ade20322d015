from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# ">= 0.9", "ratio >= 0.8", "<= 1 s", "<= 5 s (session 3 s)": a bound on the ratio when the row
# has a baseline, on the figure itself when it has none
_BOUND = re.compile(r"^(?:ratio )?(>=|<=) ([0-9.]+)(?: [a-z]+)?(?: \(.*\))?$")


@dataclass(frozen=True)
class Result:
    """One side-by-side measurement: ordo's figure, the baseline's, and the ratio between them.
    ``spread``: the lowest and highest ratio of the rounds the figure is the median of."""

    name: str
    ordo: float
    baseline: float
    unit: str
    target: str = ""
    spread: tuple[float, float] | None = None

    @classmethod
    def absolute(cls, name: str, value: float, unit: str, target: str = "") -> Result:
        """A figure with no baseline to compare with (a latency, a stall)."""
        return cls(name, value, float("nan"), unit, target)

    @classmethod
    def paired(
        cls, name: str, ordo: Sequence[float], baseline: Sequence[float], unit: str, target: str = ""
    ) -> Result:
        """Of rounds measured side by side (ordo[i] beside baseline[i]), the round with the median
        ratio, and the spread of all rounds' ratios. Rates on a shared machine swing between
        rounds, so comparing each side's best would compare different luck; a round shares its
        moment's load."""
        ratios = sorted((o / b, o, b) for o, b in zip(ordo, baseline, strict=True))
        _, median_ordo, median_baseline = ratios[len(ratios) // 2]
        return cls(name, median_ordo, median_baseline, unit, target, (ratios[0][0], ratios[-1][0]))

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
