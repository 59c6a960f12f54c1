"""What every family's scores have (count, values(), as_json(), line(), table()): the
validation rows' at each log step and the end, the training rows' and `evaluate`'s."""

from __future__ import annotations

import numpy as np


class Scores:
    """What every family's scores have: count, values(), as_json(), line() and table()."""

    count: int

    def values(self) -> dict[str, float]:
        """Each score by name, as TensorBoard and the metrics JSON name them."""
        raise NotImplementedError

    def as_json(self) -> dict[str, float | None]:
        """JSON has no NaN: an undefined score is null."""
        return {k: v if np.isfinite(v) else None for k, v in self.values().items()}
