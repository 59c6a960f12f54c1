"""The collectives a job's ranks make, by one of two means: Horovod's (SGD, Gloo launches,
elastic runs, a script that has started Horovod), or MPI's own through mpi4py (an exact fit
under an MPI launcher: mpirun, srun, horovodrun's MPI mode). ranks.Job holds one and every
collective the tool makes goes through it, so a run that needs no Horovod imports neither
Horovod nor TensorFlow; a job of one rank holds none and makes no collective.

mpi4py's sums are reduced on rank 0 and broadcast, so that every rank holds the same bytes:
the ranks take the same decisions from them (IRLS's step halving) and must never disagree in a
last bit.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from hvd_linreg.runtime.buffers import aligned_empty
from hvd_linreg.runtime.daemons import end_stalled_rank
from hvd_linreg.runtime.launcher import launch_rank

if TYPE_CHECKING:
    import tensorflow as tf


class HorovodCollectives:
    """Horovod's collectives, over its MPI or Gloo controller."""

    def __init__(self, name: str):
        self.name = name  # "MPI" or "Gloo", as Horovod runs

    def allgather(self, obj, name: str | None = None) -> list:
        import horovod.tensorflow as hvd

        return hvd.allgather_object(obj, name=name)

    def allgather_rows(self, rows: np.ndarray, name: str) -> np.ndarray:
        import horovod.tensorflow as hvd
        import tensorflow as tf

        return hvd.allgather(tf.constant(rows), name=name).numpy()

    def alltoall(self, rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
        import horovod.tensorflow as hvd
        import tensorflow as tf

        received, _ = hvd.alltoall(as_tensor(rows), splits=tf.constant(counts, tf.int32))
        return received.numpy()

    def allreduce_sum(self, values: np.ndarray, name: str) -> np.ndarray:
        import horovod.tensorflow as hvd
        import tensorflow as tf

        return hvd.allreduce(tf.constant(values), op=hvd.Sum, name=name).numpy()

    def broadcast(self, obj):
        import horovod.tensorflow as hvd

        return hvd.broadcast_object(obj, root_rank=0)


class MpiCollectives:
    """MPI's collectives through mpi4py, on MPI_COMM_WORLD. A collective that does not return
    within limit_s (a rank stopped or lost: MPI would wait for it forever) ends this rank with
    exit code 1, as Horovod's stall shutdown ends a Horovod job; 0 waits forever."""

    name = "mpi4py"

    def __init__(self, limit_s: float):
        self.limit_s = limit_s
        # MPI_Init waits for every rank to start it (Open MPI's fence): bounded as well
        self.comm = self._bounded(_world)

    def allgather(self, obj, name: str | None = None) -> list:
        return self._bounded(self.comm.allgather, obj)

    def allgather_rows(self, rows: np.ndarray, name: str) -> np.ndarray:
        rows = np.ascontiguousarray(rows)
        width = int(np.prod(rows.shape[1:], dtype=int))
        counts = np.array(self.allgather(len(rows)), int)
        out = np.empty((int(counts.sum()), *rows.shape[1:]), rows.dtype)
        self._bounded(self.comm.Allgatherv, rows, (out, counts * width))
        return out

    def alltoall(self, rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """counts[r] rows to rank r; the rows every rank sent here, by sending rank."""
        rows = np.ascontiguousarray(rows)
        width = int(np.prod(rows.shape[1:], dtype=int))
        incoming = np.array(self._bounded(self.comm.alltoall, [int(c) for c in counts]))
        out = aligned_empty((int(incoming.sum()), *rows.shape[1:]), rows.dtype)
        send = (rows, np.asarray(counts, int) * width)
        self._bounded(self.comm.Alltoallv, send, (out, incoming * width))
        return out

    def allreduce_sum(self, values: np.ndarray, name: str) -> np.ndarray:
        """Reduced on rank 0, then broadcast: the same bytes on every rank."""
        from mpi4py import MPI

        values = np.ascontiguousarray(values, np.float64)
        total = np.empty_like(values)
        self._bounded(self.comm.Reduce, values, total, MPI.SUM, 0)
        self._bounded(self.comm.Bcast, total, 0)
        return total

    def broadcast(self, obj):
        return self._bounded(self.comm.bcast, obj, 0)

    def barrier(self) -> None:
        self._bounded(self.comm.Barrier)

    def _bounded(self, call, *args):
        # mpi4py releases the GIL while MPI waits: the timer runs
        return bounded(self.limit_s, lambda: _stalled(launch_rank(), self.limit_s), call, *args)


def bounded(limit_s: float, on_timeout, call, *args):
    """call(*args), with on_timeout() run on a timer thread if it has not returned within
    limit_s (0 or less: no limit); on_timeout ends the rank (end_stalled_rank). The call must
    release the GIL while it waits, as mpi4py and ctypes do, for the timer to run."""
    if limit_s <= 0:
        return call(*args)
    timer = threading.Timer(limit_s, on_timeout)
    timer.daemon = True
    timer.start()
    try:
        return call(*args)
    finally:
        timer.cancel()


def _world():
    """MPI_COMM_WORLD, MPI started by mpi4py's import (once: later imports find it started)."""
    from mpi4py import MPI

    return MPI.COMM_WORLD


# What a Job's collectives are made by
Collectives = HorovodCollectives | MpiCollectives


def _stalled(rank: int, limit_s: float) -> None:
    """End this rank: a collective has waited limit_s for a rank that never came."""
    end_stalled_rank(
        f"hvd-linreg: error: [rank {rank}] a collective waited {limit_s:.0f} s: another rank is "
        "stuck or dead; ending the job (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS sets the limit)"
    )


def as_tensor(a: np.ndarray) -> tf.Tensor:
    """A tensor on the array's memory: tf.constant would copy it, twice over while converting.
    DLPack shares memory that is C-ordered, writable and 64-byte aligned; anything else is
    first copied once into such a buffer. Nothing writes to a shard after loading, nor to rows
    being sent, so sharing is safe."""
    import tensorflow as tf

    if not (a.flags.c_contiguous and a.flags.writeable and a.ctypes.data % 64 == 0):
        a, unaligned = aligned_empty(a.shape, a.dtype), a
        a[...] = unaligned
    return tf.experimental.dlpack.from_dlpack(a.__dlpack__())
