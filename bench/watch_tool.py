"""Run hvd-linreg in this process (`hvd_linreg.cli.main`) and watch it from the outside.

    horovodrun -np N python bench/watch_tool.py OUT.json [hvd-linreg flags]

Rank 0 writes to OUT.json every rank's peak RSS, its peak PSS (sampled twice a second: the
shared libraries' pages, which RSS counts whole in every rank, divided among the processes that
share them) and the moments it logged each `Step: N Loss: X` line: the gaps between them time
each stretch of `--log_every` steps, so one long run gives a median instead of a lone figure.
"""

from __future__ import annotations

import json
import resource
import sys
import threading
import time
from pathlib import Path

from hvd_linreg.cli import main


class StepClock:
    """Stands in for stdout: notes when each step line is written, then passes it on."""

    def __init__(self, stream):
        self.stream = stream
        self.times: list[float] = []

    def write(self, text: str) -> int:
        if text.startswith("Step: "):  # the tool writes each log line in one call
            self.times.append(time.perf_counter())
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


def pss_mib() -> float:
    with open("/proc/self/smaps_rollup") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Pss:")) / 1024


class PeakPss(threading.Thread):
    """The largest PSS seen, sampled every `every` seconds until stopped."""

    def __init__(self, every: float = 0.5):
        super().__init__(daemon=True)
        self.every, self.peak, self.done = every, pss_mib(), threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.peak = max(self.peak, pss_mib())

    def stop(self) -> float:
        self.done.set()
        self.join()
        return max(self.peak, pss_mib())


def gathered(mine: tuple) -> tuple[int, list]:
    """This rank's number and every rank's `mine`, by the collectives the tool's run used,
    still up: Horovod's (SGD), MPI's through mpi4py (an exact fit under mpirun), or none."""
    hvd = sys.modules.get("horovod.tensorflow")
    if hvd is not None and hvd.is_initialized():
        return hvd.rank(), hvd.allgather_object(mine)
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized():
        return mpi.COMM_WORLD.Get_rank(), mpi.COMM_WORLD.allgather(mine)
    return 0, [mine]


def run(out: str, argv: list[str]) -> int:
    clock = StepClock(sys.stdout)
    sys.stdout = clock
    pss = PeakPss()
    pss.start()
    code = main(argv)
    peak_pss = pss.stop()
    sys.stdout = clock.stream
    if code != 0:
        return code
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    rank, peaks = gathered((peak_mib, peak_pss))
    if rank == 0:
        watched = {
            "peak_rss_mib": [rss for rss, _ in peaks],
            "peak_pss_mib": [pss for _, pss in peaks],
            "step_log_s": clock.times,
        }
        Path(out).write_text(json.dumps(watched))
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2:]))
