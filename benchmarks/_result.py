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

    @property
    def ratio(self) -> float:
        return self.ordo / self.baseline if self.baseline else float("nan")

    @property
    def ordo_text(self) -> str:
        return f"{self.ordo:,.0f} {self.unit}"

    @property
    def baseline_text(self) -> str:
        return f"{self.baseline:,.0f} {self.unit}"
