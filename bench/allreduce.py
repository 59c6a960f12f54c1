"""Allreduce bandwidth of one 16 MB gradient (4 M float32 features), in two programs:

* `--program horovod` (under horovodrun, MPI or Gloo controller): the tool's path. Horovod is
  started by `hvd_linreg.runtime.ranks.init` (the tool's environment defaults and thread counts),
  then `hvd.allreduce(grad, op=hvd.Sum)` runs inside a `tf.function` with a `tf.range` loop, as the
  tool's `DistributedOptimizer` does in its training loop (the tool divides each rank's loss by the
  rank count, so the sum is the average). `op=hvd.Average`, Horovod's usual way, is timed next to
  it: a sum plus one more pass over the result (the division).
* `--program mpi4py` (under mpirun): `comm.Allreduce` on a buffer of the same size, in a
  process without Horovod or TensorFlow: the floor.

Launched by run.py; rank 0 writes the median seconds per allreduce as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np


def horovod_blocks(num_floats: int, per_block: int) -> tuple[dict, callable, int, int]:
    """Timed blocks of `per_block` Horovod allreduces, a barrier, this rank and the size."""
    from hvd_linreg.runtime import ranks, startup

    startup.quiet_tensorflow()
    ranks.init()
    import horovod.tensorflow as hvd
    import tensorflow as tf

    gradient = tf.constant(np.ones(num_floats, np.float32))

    def block_of(op):
        @tf.function
        def block(x: tf.Tensor) -> tf.Tensor:
            for _ in tf.range(per_block):
                x = hvd.allreduce(x, op=op)
            return x

        block(gradient).numpy()  # trace and warm up (buffers, caches) before timing
        return lambda: block(gradient).numpy()

    blocks = {"sum": block_of(hvd.Sum), "average": block_of(hvd.Average)}
    return blocks, lambda: hvd.allreduce(tf.constant(0.0), name="barrier"), hvd.rank(), hvd.size()


def mpi4py_blocks(num_floats: int, per_block: int) -> tuple[dict, callable, int, int]:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    send = np.ones(num_floats, np.float32)
    recv = np.empty_like(send)

    def block() -> None:
        for _ in range(per_block):
            comm.Allreduce(send, recv)

    block()  # warm up
    return {"mpi4py": block}, comm.Barrier, comm.rank, comm.size


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--program", choices=("horovod", "mpi4py"), required=True)
    p.add_argument("--num_floats", type=int, default=4 << 20, help="float32 values (16 MiB)")
    p.add_argument("--per_block", type=int, default=10, help="allreduces per timed block")
    p.add_argument("--repeats", type=int, default=7, help="timed blocks of each")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    programs = {"horovod": horovod_blocks, "mpi4py": mpi4py_blocks}
    blocks, barrier, rank, size = programs[args.program](args.num_floats, args.per_block)

    times: dict[str, list[float]] = {name: [] for name in blocks}
    for _ in range(args.repeats):  # interleaved, so all see the same machine
        for name, block in blocks.items():
            barrier()  # start every block together
            t0 = time.perf_counter()
            block()
            times[name].append((time.perf_counter() - t0) / args.per_block)
    if rank == 0:
        result = {
            "size": size,
            "bytes": 4 * args.num_floats,
            "median_s": {name: statistics.median(t) for name, t in times.items()},
            "times_s": times,
        }
        Path(args.out).write_text(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
