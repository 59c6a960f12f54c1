"""The floor: the seed job's averaged-gradient SGD in plain NumPy, one `comm.Allreduce` of the
gradient per step. Nothing a framework could do is cheaper than this on the same machine.

Launched by run.py: `mpirun -np N python bench/floor.py --initial W.. B --out PATH`.
"""

from __future__ import annotations

import numpy as np
from contract import job_parser, shard, timed_runs
from mpi4py import MPI


def train(comm: MPI.Comm, X: np.ndarray, y: np.ndarray, theta: np.ndarray, args) -> np.ndarray:
    """num_steps steps of SGD on the mean squared error, gradients averaged over the ranks."""
    theta = theta.copy()
    offsets = np.arange(args.batch_size)
    local = np.empty_like(theta)
    total = np.empty_like(theta)
    # d/dtheta of mean((X w + b - y)^2), averaged over ranks: sum over ranks / (B * size).
    scale = np.float32(2.0 * args.learning_rate / (args.batch_size * comm.size))
    for step in range(args.num_steps):
        rows = (step * args.batch_size + offsets) % len(y)  # the batching contract
        Xb = X[rows]
        residual = Xb @ theta[:-1] + theta[-1] - y[rows]
        local[:-1] = Xb.T @ residual
        local[-1] = residual.sum()
        comm.Allreduce(local, total, op=MPI.SUM)
        theta -= scale * total
    return theta


def main() -> None:
    args = job_parser(__doc__).parse_args()
    comm = MPI.COMM_WORLD
    X, y = shard(args, comm.rank, comm.size)
    start = np.asarray(args.initial, np.float32)
    timed_runs(comm, lambda: train(comm, X, y, start, args), args.repeats, args.out)


if __name__ == "__main__":
    main()
