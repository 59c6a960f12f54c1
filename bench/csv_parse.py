"""Section 11's rows and programs: a CSV file with two string columns (write), parsed and
encoded by the tool's reader on each rank (tool, under mpirun), or by pyarrow on one core
(arrow).

    python bench/csv_parse.py --write rows.csv --rows 16000000
    mpirun -np 2 python bench/csv_parse.py --tool rows.csv
    python bench/csv_parse.py --arrow rows.csv

Each prints one JSON line: the rows, and the seconds from the file on disk (in the page cache)
to the encoded rows in memory: for the tool, its shard, the word columns as level codes
(load_shard, every rank between two barriers); for pyarrow, read_csv's table with the string
columns dictionary encoded."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

REGIONS = [f"region {i:02d}" for i in range(12)]
# Levels as a model of a few dozen dummies has them (a shard holds their codes, not dummies).
PRODUCTS = [f"product-{i:03d}" for i in range(30)]
STRINGS = ("region", "product")


def write(path: str, rows: int) -> None:
    """x1, x2, region, product, y: two float columns, two string columns, a float target."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(0)
    names = ("x1", "x2", "region", "product", "y")
    schema = pa.schema([(n, pa.string() if n in STRINGS else pa.float64()) for n in names])
    # as pandas writes it: no quotes where none are needed
    options = pacsv.WriteOptions(quoting_style="none")
    with pacsv.CSVWriter(path, schema, write_options=options) as out:
        step = 1_000_000
        for start in range(0, rows, step):
            n = min(step, rows - start)
            x = rng.standard_normal((n, 2)).round(6)
            r, p = rng.integers(0, len(REGIONS), n), rng.integers(0, len(PRODUCTS), n)
            y = (x @ [1.5, -2.0] + 0.1 * r + 0.01 * p + rng.standard_normal(n)).round(6)
            columns = [x[:, 0], x[:, 1], np.array(REGIONS)[r], np.array(PRODUCTS)[p], y]
            out.write_table(pa.table(dict(zip(names, columns)), schema=schema))


def tool(path: str) -> dict:
    from hvd_linreg.config import Config
    from hvd_linreg.data import load_shard
    from hvd_linreg.runtime import ranks

    job = ranks.init()
    cfg = Config(data=path, solver="exact")
    job.barrier("start")
    start = time.perf_counter()
    shard = load_shard(cfg, job.rank, job.size, job)
    job.barrier("loaded")
    seconds = time.perf_counter() - start
    return {"rank": job.rank, "rows": shard.num_samples, "features": shard.num_features,
            "seconds": seconds}  # fmt: skip


def arrow(path: str) -> dict:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    pa.set_cpu_count(1)
    start = time.perf_counter()
    table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(use_threads=False))
    encoded = [table.column(name).dictionary_encode() for name in STRINGS]
    seconds = time.perf_counter() - start
    return {"rows": table.num_rows, "levels": [len(c.chunk(0).dictionary) for c in encoded],
            "seconds": seconds}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--write", metavar="PATH")
    p.add_argument("--rows", type=int, default=16_000_000)
    p.add_argument("--tool", metavar="PATH")
    p.add_argument("--arrow", metavar="PATH")
    args = p.parse_args()
    if args.write:
        write(args.write, args.rows)
        return
    result = tool(args.tool) if args.tool else arrow(args.arrow)
    if args.arrow or result.pop("rank", 0) == 0:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
