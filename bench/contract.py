"""What the floor and the peer share with the tool: the job's flags, the sharding contract and
the result they hand back to run.py.

The data comes from `hvd_linreg.data.load_shard`: that is the dataset's definition, not
the training, so the programs compared with the tool train on exactly the same rows.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hvd_linreg.config import Config
from hvd_linreg.data import load_shard


def job_parser(description: str) -> argparse.ArgumentParser:
    """The tool's job flags (same names), the start point, and how often to time the run."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--num_samples", type=int, default=1000)
    p.add_argument("--num_features", type=int, default=1)
    p.add_argument("--batch_size", type=int, default=100, help="per rank")
    p.add_argument("--num_steps", type=int, default=3000)
    p.add_argument("--log_every", type=int, default=1000, help="steps per compiled call")
    p.add_argument("--learning_rate", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--initial", type=float, nargs="+", required=True, help="w_0 .. w_{F-1} b from the tool"
    )
    p.add_argument("--repeats", type=int, default=5, help="timed runs from the same start")
    p.add_argument("--out", required=True, help="rank 0 writes the result here as JSON")
    return p


def shard(args: argparse.Namespace, rank: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """This rank's SGD rows of the synthetic dataset, exactly as the tool loads them."""
    cfg = Config(
        seed=args.seed,
        num_samples=args.num_samples,
        num_features=args.num_features,
        batch_size=args.batch_size,
    )
    s = load_shard(cfg, rank, size)
    return s.X[: s.num_train], s.y[: s.num_train]


def timed_runs(comm, run: Callable[[], np.ndarray], repeats: int, out: str) -> None:
    """run() `repeats` times, each from a common start (a barrier, as the tool's hvd.join()
    gives); rank 0 writes the first run's [w..., b] and every run's wall time to out."""
    params, times = None, []
    for _ in range(repeats):
        comm.Barrier()
        t0 = time.perf_counter()
        theta = run()
        times.append(time.perf_counter() - t0)
        params = theta if params is None else params
    if comm.rank == 0:
        write_result(out, comm.size, params, times)


def write_result(path: str, size: int, params: np.ndarray, times_s: list[float]) -> None:
    """Final [w..., b] of the first run and the wall time of every timed run."""
    result = {
        "size": size,
        "w": [float(v) for v in params[:-1]],
        "b": float(params[-1]),
        "times_s": times_s,
    }
    Path(path).write_text(json.dumps(result) + "\n")
