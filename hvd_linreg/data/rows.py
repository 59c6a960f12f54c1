"""Rows: a block of rows as the tool carries them from data/ to the trainer, the solvers, the
scores and predict. A column a run adds (a prior weight, an offset) is one field here."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Rows(NamedTuple):
    X: np.ndarray  # (rows, features), float32 or float64
    y: np.ndarray  # (rows,), the dtype of X
    weight: np.ndarray | None = None  # each row's prior weight; None: 1
    offset: np.ndarray | None = None  # added to each row's linear predictor; None: 0
