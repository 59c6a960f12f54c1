"""Bytes each rank reads from a data file as it loads its shard, at 1, 2 and 4 ranks.

Each rank's load runs alone in a fresh process, after the file's pages were dropped from the
page cache (posix_fadvise DONTNEED), and reports /proc/self/io read_bytes: what the rank reads
from disk (or a cluster's shared file system) on a node of its own. Side by side on one machine
the ranks share the page cache, and whichever touches a page first is charged for it.

    python bench/io.py                       # this tree, a 1.09 GB .npy in /tmp, a CSV, Parquet
    python bench/io.py --before /tmp/old     # also a tree of the code before (git archive)

The Parquet file holds the .npy's rows in row groups of --row_group rows (default: the batch
size, so that each rank's runs are whole row groups; 0: no Parquet file).

The files are written once to --dir and deleted at the end (--keep keeps them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SIZES = (1, 2, 4)


def read_bytes() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("read_bytes:")).split()[1])


def drop_from_page_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages cannot be dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def load_one_rank(src: str, data: str, rank: int, size: int, batch_size: int) -> None:
    """In a fresh process: import hvd_linreg from src, load one rank's shard, print the bytes."""
    sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, src)
    from hvd_linreg.config import Config
    from hvd_linreg.data import load_shard

    drop_from_page_cache(Path(data))
    before = read_bytes()
    if data.endswith(".csv"):  # the byte range the rank parses (the rest is an alltoall)
        from hvd_linreg.data import csv_split_text

        header = len(open(data, "rb").readline())
        csv_split_text(Path(data), header, rank, size)
    else:
        load_shard(Config(data=data, batch_size=batch_size), rank, size)
    print(json.dumps({"read_bytes": read_bytes() - before}))


def write_npy(path: Path, rows: int, features: int) -> None:
    out = np.lib.format.open_memmap(path, "w+", np.float32, (rows, features + 1))
    rng = np.random.default_rng(0)
    w = rng.standard_normal(features).astype(np.float32)
    for start in range(0, rows, 1 << 18):
        X = rng.standard_normal((min(1 << 18, rows - start), features), np.float32)
        out[start : start + len(X), :-1] = X
        out[start : start + len(X), -1] = X @ w + 2
    out.flush()
    del out


def write_parquet(path: Path, npy: Path, row_group: int) -> None:
    """The .npy's rows as Parquet columns x0, x1, ..., y, in row groups of row_group rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = np.load(npy, mmap_mode="r")
    names = [f"x{j}" for j in range(rows.shape[1] - 1)] + ["y"]
    schema = pa.schema([(name, pa.float32()) for name in names])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, len(rows), row_group):
            part = np.ascontiguousarray(rows[start : start + row_group].T)
            writer.write_table(pa.table(dict(zip(names, part)), schema=schema))


def write_csv(path: Path, npy: Path, num_bytes: int) -> None:
    """The .npy's first 16 K rows as text (%.6g), repeated until the file holds num_bytes:
    what is read is measured here, not what it says."""
    rows = np.load(npy, mmap_mode="r")[: 1 << 14]
    block = "\n".join(",".join(f"{v:.6g}" for v in row) for row in rows) + "\n"
    with open(path, "w") as f:
        f.write(",".join([f"x{j}" for j in range(rows.shape[1] - 1)] + ["y"]) + "\n")
        while f.tell() < num_bytes:
            f.write(block)


def measure(src: str, data: Path, batch_size: int) -> list[tuple[int, list[int]]]:
    """(ranks, bytes read by each rank) for each number of ranks."""
    rows = []
    for size in SIZES:
        per_rank = []
        for rank in range(size):
            cmd = [sys.executable, __file__, "--one", src, str(data), str(rank), str(size)]
            out = subprocess.run(
                [*cmd, str(batch_size)], check=True, capture_output=True, text=True
            ).stdout
            per_rank.append(json.loads(out.splitlines()[-1])["read_bytes"])
        rows.append((size, per_rank))
    return rows


def print_table(label: str, data: Path, rows: list[tuple[int, list[int]]]) -> None:
    file_mb = data.stat().st_size / 1e6
    print(f"\n{label}: {data.name}, {file_mb:.0f} MB")
    print("ranks  MB read by each rank          largest / (file / ranks)")
    for size, per_rank in rows:
        each = " ".join(f"{b / 1e6:7.1f}" for b in per_rank)
        print(f"{size:<5}  {each:<30}  {max(per_rank) / 1e6 / (file_mb / size):.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=4_200_000)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--batch_size", type=int, default=65536, help="per rank, as in the tool")
    p.add_argument("--before", help="a tree of the code before, measured first")
    p.add_argument("--csv_bytes", type=int, default=1_050_000_000, help="0: no CSV")
    p.add_argument("--row_group", type=int, help="Parquet rows per row group (0: no Parquet)")
    p.add_argument("--dir", default="/tmp")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    npy = Path(args.dir) / "hvd_linreg_io.npy"
    csv = Path(args.dir) / "hvd_linreg_io.csv"
    parquet = Path(args.dir) / "hvd_linreg_io.parquet"
    row_group = args.batch_size if args.row_group is None else args.row_group
    try:
        if not npy.exists():
            write_npy(npy, args.rows, args.features)
        trees = ([("before", args.before)] if args.before else []) + [("after", str(REPO))]
        for label, src in trees:
            print_table(f".npy, {label}", npy, measure(src, npy, args.batch_size))
        if args.csv_bytes:
            if not csv.exists():
                write_csv(csv, npy, args.csv_bytes)
            print_table(".csv byte ranges, after", csv, measure(str(REPO), csv, args.batch_size))
        if row_group:
            write_parquet(parquet, npy, row_group)
            label = f".parquet, row groups of {row_group} rows"
            print_table(label, parquet, measure(str(REPO), parquet, args.batch_size))
    finally:
        if not args.keep:
            for path in (npy, csv, parquet):
                path.unlink(missing_ok=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        src, data, rank, size, batch = sys.argv[2:7]
        load_one_rank(src, data, int(rank), int(size), int(batch))
    else:
        main()
