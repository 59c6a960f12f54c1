"""The synthetic generator's speed on this process's core: hvd-linreg's counter-based rows
next to NumPy's own (sequential, not counter-based) float32 normals of the same count.
Prints one JSON line: GB/s of each, the median of several runs."""

from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np

from hvd_linreg.data import synthetic_rows

ROWS, FEATURES, RUNS = 1 << 20, 64, 5


def gb_per_s(make) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        arrays = make()
        times.append(time.perf_counter() - start)
    return sum(a.nbytes for a in arrays) / statistics.median(times) / 1e9


def main() -> int:
    rows = np.arange(ROWS, dtype=np.int64)
    rng = np.random.default_rng(0)
    values = ROWS * (FEATURES + 1)
    result = {
        "rows": ROWS,
        "features": FEATURES,
        "tool_gb_s": gb_per_s(lambda: synthetic_rows(0, rows, FEATURES)),
        "numpy_gb_s": gb_per_s(lambda: (rng.standard_normal(values, dtype=np.float32),)),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
