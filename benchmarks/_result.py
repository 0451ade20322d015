from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    """One side-by-side measurement: ordo's figure, the baseline's, and the ratio between them."""

    name: str
    ordo: float
    baseline: float
    unit: str
    target: str = ""

    @classmethod
    def absolute(cls, name: str, value: float, unit: str, target: str = "") -> Result:
        """A figure with no baseline to compare with (a latency, a stall)."""
        return cls(name, value, float("nan"), unit, target)

    @property
    def ratio(self) -> float:
        return self.ordo / self.baseline if self.baseline == self.baseline and self.baseline else float("nan")

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


def median_pair(ordo: list[float], baseline: list[float]) -> tuple[float, float]:
    """Of runs measured side by side (ordo[i] beside baseline[i]), the pair with the median ratio.
    Rates through the testbed swing by 2-3x between runs, so comparing each side's best would
    compare different luck; a pair shares its moment's load."""
    pairs = sorted(zip(ordo, baseline, strict=True), key=lambda pair: pair[0] / pair[1])
    return pairs[len(pairs) // 2]
