"""The synthetic generator's speed on this process's core: hvd-linreg's counter-based rows
next to NumPy's own (sequential, not counter-based) float32 normals of the same count, one
thread each (the tool's rank uses its cores: Job.threads). Prints one JSON line: GB/s of
each, the median of several runs, the two taking turns."""

from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np

from hvd_linreg.data import synthetic_rows

ROWS, FEATURES, RUNS = 1 << 20, 64, 5


def gb_per_s(makers: dict) -> dict:
    """Each maker's GB/s, the median of RUNS runs; the makers take turns, so that a moment
    of load elsewhere on the machine falls on both and not on one."""
    times: dict = {name: [] for name in makers}
    sizes = {}
    for _ in range(RUNS):
        for name, make in makers.items():
            start = time.perf_counter()
            arrays = make()
            times[name].append(time.perf_counter() - start)
            sizes[name] = sum(a.nbytes for a in arrays)
            del arrays
    return {name: sizes[name] / statistics.median(t) / 1e9 for name, t in times.items()}


def main() -> int:
    rows = np.arange(ROWS, dtype=np.int64)
    rng = np.random.default_rng(0)
    values = ROWS * (FEATURES + 1)
    speeds = gb_per_s(
        {
            "tool_gb_s": lambda: synthetic_rows(0, rows, FEATURES),
            "numpy_gb_s": lambda: (rng.standard_normal(values, dtype=np.float32),),
        }
    )
    print(json.dumps({"rows": ROWS, "features": FEATURES, **speeds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
