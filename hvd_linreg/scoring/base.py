"""What every family's scores have (count, values(), as_json(), line(), table()): the
validation rows' at each log step and the end, the training rows' and `evaluate`'s. A kind of
scores declares its figures (SHOWN); the three ways of showing them are made here."""

from __future__ import annotations

import math

import numpy as np


class Scores:
    """What every family's scores have: count, values(), as_json(), line() and table()."""

    count: int
    # Each figure: (its field, as TensorBoard and the metrics JSON name it; its name in the log
    # line; its name in evaluate's table)
    SHOWN: tuple[tuple[str, str, str], ...] = ()
    UNDEFINED: dict[str, str] = {}  # why a figure can be nan, where it can: said in the table
    NOTES: dict[str, str] = {}  # what the table adds after a figure

    def values(self) -> dict[str, float]:
        """Each score by name, as TensorBoard and the metrics JSON name them."""
        return {name: getattr(self, name) for name, _, _ in self.SHOWN}

    def as_json(self) -> dict[str, float | None]:
        """JSON has no NaN: an undefined score is null."""
        return {k: v if np.isfinite(v) else None for k, v in self.values().items()}

    def line(self) -> str:
        """The scores as the log lines and the summary show them."""
        return ", ".join(f"{said} {getattr(self, name):.6g}" for name, said, _ in self.SHOWN)

    def table(self) -> list[str]:
        """The scores one per line, as `evaluate` prints them, their values aligned."""
        width = max(len(label) for _, _, label in self.SHOWN) + 2
        lines = []
        for name, _, label in self.SHOWN:
            value = getattr(self, name)
            if name in self.UNDEFINED and math.isnan(value):
                text = f"undefined ({self.UNDEFINED[name]})"
            else:
                text = f"{value:.6g}{self.NOTES.get(name, '')}"
            lines.append(f"  {label + ':':<{width}}{text}")
        return lines
