"""Write scikit-learn's diabetes data (442 patients x 10 features, bundled with the package: no
download) as a float64 CSV for hvd-linreg: a header line, then the features and the target,
disease progression a year later, as the last column.

    python docs/diabetes_csv.py diabetes.csv
    hvd-linreg --data diabetes.csv --solver exact

With --folds K it adds a column `fold` before the target, patient i's fold i mod K + 1, for
cross-validation by --fold_column that R's cv.glmnet(foldid = d$fold) can repeat.
"""

from __future__ import annotations

import sys

import numpy as np
from sklearn.datasets import load_diabetes


def write(path: str, folds: int = 0) -> None:
    data = load_diabetes()
    fold = [np.arange(len(data.target)) % folds + 1] if folds else []
    table = np.c_[(data.data, *fold, data.target)]
    header = ",".join([*data.feature_names, *(["fold"] if folds else []), "progression"])
    # repr precision: the CSV holds every float64 exactly
    np.savetxt(path, table, delimiter=",", header=header, comments="", fmt="%.17g")


if __name__ == "__main__":
    args = sys.argv[1:]
    folds = int(args[1]) if args[:1] == ["--folds"] and len(args) == 3 else 0
    if len(args) != (3 if folds else 1):
        sys.exit("usage: python docs/diabetes_csv.py [--folds K] OUT.csv")
    write(args[-1], folds)
