"""Write statsmodels' 1996 American National Election Study extract (944 voters, bundled with
statsmodels: no download) as a CSV for hvd-linreg: the five features of statsmodels' MNLogit
example, then PID, party identification from 0 (strong Democrat) to 6 (strong Republican), the
seven classes.

    python docs/anes96_csv.py anes96.csv
    hvd-linreg --data anes96.csv --model multinomial --solver exact
"""

from __future__ import annotations

import sys

from statsmodels.datasets import anes96

FEATURES = ["logpopul", "selfLR", "age", "educ", "income"]


def write(path: str) -> None:
    data = anes96.load_pandas().data
    table = data[FEATURES].assign(PID=data["PID"].astype(int))
    table.to_csv(path, index=False, float_format="%.17g")  # every float64 exactly


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python docs/anes96_csv.py OUT.csv")
    write(sys.argv[1])
