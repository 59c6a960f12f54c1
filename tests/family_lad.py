"""A model family for the tests only: least absolute deviations, y = X·w + b fitted by the
mean absolute error (plus --l2's ridge term), by SGD; it has no exact solver.

It shows the seam: a family is a Family subclass plus its registration
(`FAMILIES["lad"] = "family_lad:LAD"`, and the loss's name where it is not a mean half deviance),
and nothing in hvd_linreg changes. What is the same as
the linear family (the prediction, the scores, the serving signature, the plotted curve) it
inherits from there. Run as a script, it registers itself and is the hvd-linreg command, so
that a launcher can start it on every rank.
"""

from __future__ import annotations

import sys

import numpy as np

from hvd_linreg.families import FAMILIES
from hvd_linreg.families.linear import Linear
from hvd_linreg.families.maths import namespace
from hvd_linreg.report import LOSS_NAMES


class LAD(Linear):
    NAME = "lad"
    SOLVER = None  # no exact solver
    MAX_EXACT_FEATURES = 0

    def loss_terms(self, y: np.ndarray, eta: np.ndarray) -> np.ndarray:
        """|η - y|, on NumPy arrays and SGD's tensors alike."""
        return namespace(eta).abs(eta - y)


def register() -> None:
    FAMILIES[LAD.NAME] = "family_lad:LAD"
    LOSS_NAMES[LAD.NAME] = "mean absolute error"


if __name__ == "__main__":
    register()
    from hvd_linreg.cli import main

    sys.exit(main())
