"""Write scikit-learn's diabetes data (442 patients x 10 features, bundled with the package: no
download) as a float64 CSV for hvd-linreg: a header line, then the features and the target,
disease progression a year later, as the last column.

    python docs/diabetes_csv.py diabetes.csv
    hvd-linreg --data diabetes.csv --solver exact
"""

from __future__ import annotations

import sys

import numpy as np
from sklearn.datasets import load_diabetes


def write(path: str) -> None:
    data = load_diabetes()
    table = np.c_[data.data, data.target]
    header = ",".join([*data.feature_names, "progression"])
    # repr precision: the CSV holds every float64 exactly
    np.savetxt(path, table, delimiter=",", header=header, comments="", fmt="%.17g")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python docs/diabetes_csv.py OUT.csv")
    write(sys.argv[1])
