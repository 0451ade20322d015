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
        return f"{self.ordo:,.3f} {self.unit}" if self.ordo < 100 else f"{self.ordo:,.0f} {self.unit}"

    @property
    def baseline_text(self) -> str:
        if self.baseline != self.baseline:  # NaN: no baseline
            return "-"
        return f"{self.baseline:,.0f} {self.unit}"
