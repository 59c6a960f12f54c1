"""A family's target domain as data, as scikit-learn's interval_y_true: the values y may take,
which data/targets.py checks every rank's rows against and names in its refusal."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Interval:
    """low < y < high, each end in the interval where it says so (the default: any y)."""

    low: float = -math.inf
    high: float = math.inf
    low_inclusive: bool = False
    high_inclusive: bool = False

    @property
    def everything(self) -> bool:
        return math.isinf(self.low) and math.isinf(self.high)

    def contains(self, y: np.ndarray) -> np.ndarray:
        above = y >= self.low if self.low_inclusive else y > self.low
        below = y <= self.high if self.high_inclusive else y < self.high
        return above & below

    def __str__(self) -> str:
        """As the refusals say it: "y >= 0", "y > 0", "y in [0, 1]"."""
        if math.isinf(self.high):
            return f"y {'>=' if self.low_inclusive else '>'} {self.low:g}"
        opened, closed = "[" if self.low_inclusive else "(", "]" if self.high_inclusive else ")"
        return f"y in {opened}{self.low:g}, {self.high:g}{closed}"
