"""Section 17: a long and wide generated design. 10,000,000 rows, three categorical columns of
100,000, 10,000 and 1,000 levels and 20 dense ones, a Poisson target, a small ridge:
`hvd-linreg --solver exact --categorical a,b,c` at 1 and 2 ranks (a Parquet file, each rank
reading its own row groups), once each: the fit's seconds, the whole process's, and each rank's
peak RSS (section() below, which bench/run.py runs). glum would form the dense sandwich of its
111,000 coefficients (about 99 GB), so it is not run beside it.

    python bench/generated_wide.py --write rows.parquet [--rows 10000000]

The 100,000 levels are eliminated (their Gram is diagonal) and the other 11,019 columns (the
intercept among them) are past the direct solver's 8,192: conjugate gradients on the Hessian's
products."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

ROWS, DENSE, LEVELS = 10_000_000, 20, {"a": 100_000, "b": 10_000, "c": 1_000}
RANKS = (1, 2)
L2 = 1e-4
CHUNK = 1 << 20  # rows generated (and a Parquet row group) at a time: memory stays small


def write(path: str, rows: int = ROWS, seed: int = 0) -> None:
    """Each level's effect ~ N(0, 0.3²), each dense column's ~ N(0, 0.1²), levels uniform,
    x ~ N(0, 1), y ~ Poisson(exp(0.2 + Σ effects + x w))."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    effects = {name: rng.normal(0.0, 0.3, n) for name, n in LEVELS.items()}
    w = rng.normal(0.0, 0.1, DENSE)
    writer = None
    for start in range(0, rows, CHUNK):
        n = min(CHUNK, rows - start)
        codes = {name: rng.integers(0, k, n).astype(np.int32) for name, k in LEVELS.items()}
        X = rng.standard_normal((n, DENSE))
        eta = 0.2 + X @ w + sum(effects[name][codes[name]] for name in LEVELS)
        y = rng.poisson(np.exp(eta)).astype(np.float64)
        table = pa.table({**codes, **{f"x{j}": X[:, j] for j in range(DENSE)}, "y": y})
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table, row_group_size=CHUNK)
    writer.close()


def tool_fit(ranks: int, data: str) -> dict:
    """The tool's fit at ranks (mpirun), watched: fit_s, whole seconds, peak RSS per rank."""
    import launch  # bench/ is on the path of bench/run.py, which runs this section

    names = ",".join(LEVELS)
    features = ",".join([*LEVELS, *(f"x{j}" for j in range(DENSE))])
    args = ["--data", data, "--target", "y", "--features", features, "--categorical", names,
            "--model", "poisson", "--solver", "exact", "--l2", repr(L2), "--quiet"]  # fmt: skip
    started = time.perf_counter()
    watched = launch.watched_tool(ranks, args, env={"OMPI_MCA_mpi_yield_when_idle": "1"})
    m = watched["metrics"]
    return {
        "fit_s": m["wall_s"],
        "whole_s": time.perf_counter() - started,
        "coefficients": len(m["w"]) + 1,
        "peak_rss_mib": watched["peak_rss_mib"],
        "params": [*m["w"], m["b"]],
    }


def section(rounds: int, progress, rows: int = ROWS) -> dict:
    """The tool at 1 and 2 ranks, once each, and the largest gap between their coefficients."""
    fits = {}
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        data = str(Path(tmp) / "rows.parquet")
        write(data, rows)
        progress(f"generated wide: {rows:,} rows written")
        for n in RANKS:
            fits[f"tool_{n}"] = tool_fit(n, data)
            progress(f"generated wide: {n} rank(s), {fits[f'tool_{n}']['fit_s']:.1f} s")
    one = np.asarray(fits["tool_1"].pop("params"))
    for fit in fits.values():
        theta = np.asarray(fit.pop("params", one))
        fit["max_gap"] = float(np.abs(theta - one).max() / max(np.abs(one).max(), 1.0))
    return {"rows": rows, "levels": LEVELS, "dense": DENSE, "l2": L2, "fits": fits}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--write", required=True)
    p.add_argument("--rows", type=int, default=ROWS)
    args = p.parse_args()
    write(args.write, args.rows)
