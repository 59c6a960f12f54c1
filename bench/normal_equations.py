"""The exact solve's baseline: least squares by the normal equations in plain NumPy and mpi4py,
centred and scaled XcᵀXc and a Cholesky factorisation, on the same rows as `hvd-linreg --solver
exact`. It does half the QR's multiply-adds (XcᵀXc is symmetric) in BLAS's fastest kernel, and
squares the design's condition number: the speed the QR gives up for its digits.

Launched by run.py: `mpirun -np N python bench/normal_equations.py --num_samples N
--num_features F --out PATH`.
"""

from __future__ import annotations

import argparse

import numpy as np
from contract import timed_runs
from mpi4py import MPI

from hvd_linreg.config import Config
from hvd_linreg.data import load_shard

BLOCK_BYTES = 16 << 20  # float64 rows at a time, as the tool's QR takes them


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--num_samples", type=int, default=1000)
    p.add_argument("--num_features", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=1, help="timed solves of the same rows")
    p.add_argument("--out", required=True, help="rank 0 writes the result here as JSON")
    return p


def blocks(shard, rows: int):
    """This rank's rows as float64 blocks [X | y]."""
    for X, y in shard.blocks(rows):
        yield np.c_[X.astype(np.float64), y.astype(np.float64)]


def solve(comm: MPI.Comm, shard) -> np.ndarray:
    """[w..., b]: means by one Allreduce, the centred Gram matrix of [X | y] by another, then
    Cholesky on the unit-diagonal scaling of XcᵀXc."""
    n = shard.num_features + 1
    rows = max(1024, BLOCK_BYTES // (8 * n))
    sums = np.zeros(n + 1)  # column sums of [X | y], row count
    for A in blocks(shard, rows):
        sums += np.append(A.sum(axis=0), len(A))
    comm.Allreduce(MPI.IN_PLACE, sums, op=MPI.SUM)
    means = sums[:-1] / sums[-1]
    gram = np.zeros((n, n))
    for A in blocks(shard, rows):
        A -= means
        gram += A.T @ A  # NumPy's syrk for a product with its own transpose
    comm.Allreduce(MPI.IN_PLACE, gram, op=MPI.SUM)
    F = n - 1
    scale = np.sqrt(np.diag(gram[:F, :F]))
    lower = np.linalg.cholesky(gram[:F, :F] / np.outer(scale, scale))
    w = np.linalg.solve(lower.T, np.linalg.solve(lower, gram[:F, F] / scale)) / scale
    return np.append(w, means[-1] - means[:-1] @ w)


def main() -> None:
    args = parser().parse_args()
    comm = MPI.COMM_WORLD
    cfg = Config(
        seed=args.seed,
        num_samples=args.num_samples,
        num_features=args.num_features,
        solver="exact",
    )
    shard = load_shard(cfg, comm.rank, comm.size)
    timed_runs(comm, lambda: solve(comm, shard), args.repeats, args.out)


if __name__ == "__main__":
    main()
