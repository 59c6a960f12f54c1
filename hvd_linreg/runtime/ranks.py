"""A rank's life in the job: who am I, how many are we, who speaks, how we agree (Job), and
how a rank starts (init), stalls (Watchdog) and ends (settle, the SIGTERM handlers).

This is the only module that starts Horovod (init, and restart for an elastic reset) or
chooses the job's collectives (collectives.py); launcher.py reads what the launcher told the
rank before, and resources.py what the host gives it.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from hvd_linreg.errors import UsageError
from hvd_linreg.runtime.collectives import Collectives, HorovodCollectives, MpiCollectives, bounded
from hvd_linreg.runtime.daemons import end_stalled_rank
from hvd_linreg.runtime.hosts import check_distinct_hosts, machine_id
from hvd_linreg.runtime.launcher import gloo_launch, job_size, launch_rank, local_size, speaks_for
from hvd_linreg.runtime.progress import Progress
from hvd_linreg.runtime.resources import thread_budget
from hvd_linreg.runtime.startup import import_tensorflow

if TYPE_CHECKING:
    import numpy as np


STALL_DEFAULTS = {
    "HOROVOD_STALL_CHECK_TIME_SECONDS": 30,
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": 120,
}


def say(line: str, *, stream=None) -> None:
    """Write one whole line: Open MPI's output tagging splits multi-part prints."""
    stream = stream or sys.stdout
    stream.write(line + "\n")
    stream.flush()


@dataclass(frozen=True)
class Job:
    """The job as this process sees it: its rank, how many there are, who speaks, how they
    agree.

    Every collective the tool makes goes through a Job method, so this list is all of them
    (besides the gradient allreduce inside Horovod's DistributedOptimizer, and elastic.py's
    snapshot broadcast, which Horovod's elastic State makes):
    - broadcast, broadcast_variables: rank 0's values on every rank;
    - allgather, allgather_rows: every rank's values, in rank order;
    - alltoall: rows sent from each rank to each rank (the CSV scatter);
    - allreduce_sum, mean: sums and averages of numbers over the ranks;
    - barrier: every rank has got here;
    - agree: the same UsageError on every rank when any rank hit one.
    Each is a no-op on one rank, so a one-rank run needs no peer. They are made by the job's
    collectives (collectives.py): Horovod's, MPI's through mpi4py, or none; broadcast_variables
    and mean take TensorFlow values, and only SGD, which always runs on Horovod, calls them.
    """

    rank: int
    size: int
    controller: str  # "MPI" or "Gloo" (Horovod's), "mpi4py", or "none" (one process)
    stall_limit_s: float  # HOROVOD_STALL_SHUTDOWN_TIME_SECONDS; 0 turns the watchdog off
    hosts: tuple[str, ...] = ()  # each rank's host name, by rank
    verbose: bool = False
    threads: int = 1  # the cores this rank may use (thread_budget): building data uses them
    # A library call's warnings are Python warnings (the caller's filters apply), not lines
    python_warnings: bool = False
    shows_progress: bool = False  # rank 0 shows an exact fit's progress (not --quiet)
    collectives: Collectives | None = field(default=None, compare=False, repr=False)  # 1 rank: none

    @property
    def is_root(self) -> bool:
        return self.rank == 0

    def log(self, line: str) -> None:
        """Rank 0 speaks for the job; other ranks only with --verbose, tagged with their rank."""
        if self.is_root:
            say(line)
        elif self.verbose:
            say(f"[rank {self.rank}] {line}")

    def progress(self, what: str, total: int | None = None, unit: str = "iteration") -> Progress:
        """The progress of a long fit, which rank 0 shows where the run is not quiet."""
        return Progress(what, total, unit, self.is_root and self.shows_progress)

    def warn(self, line: str, category: type[Warning] = UserWarning) -> None:
        """Rank 0 warns: a line on stderr, or in a library call a warning of category."""
        if not self.is_root:
            return
        if self.python_warnings:
            import warnings

            warnings.warn(line, category, stacklevel=2)
        else:
            say(f"warning: {line}", stream=sys.stderr)

    def broadcast(self, obj):
        """Rank 0's value of obj, on every rank."""
        return self.collectives.broadcast(obj) if self.size > 1 else obj

    def allgather(self, obj, name: str | None = None) -> list:
        """Every rank's value of obj, by rank, on every rank."""
        return self.collectives.allgather(obj, name) if self.size > 1 else [obj]

    def allgather_rows(self, rows: np.ndarray, name: str) -> np.ndarray:
        """Every rank's rows (a 2-D array of one width), stacked in rank order, on every rank:
        as an array, not pickled as allgather's objects are."""
        return self.collectives.allgather_rows(rows, name) if self.size > 1 else rows

    def alltoall(self, rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Send counts[r] consecutive rows to rank r (in rank order); return the rows every rank
        sent here, concatenated by sending rank."""
        return self.collectives.alltoall(rows, counts) if self.size > 1 else rows

    def broadcast_variables(self, variables: list) -> None:
        """Assign rank 0's values to these TensorFlow variables on every rank (SGD)."""
        if self.size > 1:
            import horovod.tensorflow as hvd

            hvd.broadcast_variables(variables, root_rank=0)

    def allreduce_sum(self, values, name: str) -> np.ndarray:
        """The element-wise sum over the ranks of a float64 array, on every rank."""
        import numpy as np

        values = np.asarray(values, np.float64)
        return self.collectives.allreduce_sum(values, name) if self.size > 1 else values

    def mean(self, value, name: str) -> float:
        """The average over the ranks of a number (a float or a TensorFlow scalar; SGD)."""
        if self.size == 1:
            return float(value)
        import horovod.tensorflow as hvd

        return float(hvd.allreduce(value, op=hvd.Average, name=name))

    def barrier(self, name: str) -> None:
        """Return once every rank has called it. An allreduce, not hvd.join(): after an elastic
        reset, ranks that passed a join ran on without a rank that had not (joined ranks count
        as zeros) and then failed in the next broadcast."""
        self.allreduce_sum([0.0], name)

    def agree(self, error: UsageError | None) -> None:
        """Raise the same UsageError on every rank if any rank hit one.

        A problem that only one rank sees (a bad row in its shard) must stop all of them
        together, not leave the others waiting in the first allreduce.
        """
        message = None if error is None else str(error)
        # One name on every rank: by default it is the object's type, None on some, str on others.
        messages = self.allgather(message, name="agree")
        for rank, text in enumerate(messages):
            if text is not None:
                where = f" (seen on rank {rank})" if self.size > 1 and rank != 0 else ""
                raise UsageError(text + where)


# The ops whose failure means a peer is gone: Horovod's own elastic mode reads a TensorFlow
# UnknownError naming one of them as "the job lost a rank" (horovod/tensorflow/elastic.py).
COLLECTIVE_OPS = ("HorovodAllreduce", "HorovodAllgather", "HorovodBroadcast")


def is_collective_failure(e: Exception) -> bool:
    """A collective that failed because another rank died or Horovod shut down; any other
    TensorFlow error is a bug and keeps its traceback. Without Horovod (an exact run) no
    collective of Horovod's failed: nothing is imported to tell."""
    if "horovod.tensorflow" not in sys.modules:
        return False
    from horovod.common.exceptions import HorovodInternalError
    from tensorflow.errors import UnknownError

    if isinstance(e, HorovodInternalError):
        return True
    message = getattr(e, "message", "")
    return isinstance(e, UnknownError) and (
        any(op in message for op in COLLECTIVE_OPS) or "Horovod has been shut down" in message
    )


# How long a rank that does not speak waits, on an error found before Horovod starts, for the
# rank that does: ranks launched one ssh session each (horovodrun --gloo) can start seconds
# apart. The launcher ends the waiting ranks as soon as the speaker exits.
SPEAKER_GRACE_S = 5.0


def settle(error: UsageError) -> None:
    """Before exiting on a usage error: let the rank that reports it finish first.

    Launchers end the whole job when the first rank exits non-zero; without this, a fast
    rank could get the reporting rank killed before its message is out. Ranks that agreed on
    the error wait for each other; before Horovod starts there is no one to agree with (every
    rank found a bad flag, or a host's ranks a bad host name), so the ranks that do not speak
    give the one that does a head start.
    """
    # A rank the launcher ends while it waits (it saw another rank's exit 2) exits 2 as well, so
    # that launchers reporting the worst exit code (srun) report 2, not 143.
    exit_on_sigterm(2)
    hvd = sys.modules.get("horovod.tensorflow")  # not imported: the error came before init
    mpi = sys.modules.get("mpi4py.MPI")  # imported: an exact run's collectives are MPI's
    if hvd is None and mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        if mpi.COMM_WORLD.Get_size() > 1:
            MpiCollectives(float(os.environ["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"])).barrier()
            mpi.Finalize()  # a rank that ends without it is one that failed, to mpirun
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(2)
    elif hvd is not None and hvd.is_initialized():
        if hvd.size() > 1:
            hvd.join()
            # Then straight out: Python's teardown (TensorFlow's) takes seconds and first puts
            # SIGTERM's default back, and a rank ended in it was reported as 143 by srun.
            hvd.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(2)
    elif not speaks_for(error):
        time.sleep(SPEAKER_GRACE_S)


class Watchdog:
    """Ends this rank when training makes no progress for too long.

    Horovod's own stall check (the HOROVOD_STALL_* variables) cannot run while its background
    thread is blocked inside an MPI collective waiting for a rank that stopped, so under the
    MPI controller a stuck rank would hang the job forever. This thread notices that the
    training loop has stopped coming back and exits the process; the launcher then ends the
    others. The limit is limit_s (Job.stall_limit_s), or 10 times the slowest stretch of
    training seen so far if that is longer; 0 turns it off.
    """

    def __init__(self, rank: int, limit_s: float):
        self.rank = rank
        self.limit = limit_s
        self._last = time.monotonic()
        self._slowest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="hvd-linreg-watchdog", daemon=True)

    def __enter__(self) -> Watchdog:
        self._last = time.monotonic()
        if self.limit > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()

    def progress(self) -> None:
        """Call after each stretch of training steps."""
        now = time.monotonic()
        self._slowest = max(self._slowest, now - self._last)
        self._last = now

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            idle = time.monotonic() - self._last
            if idle > max(self.limit, 10 * self._slowest):
                end_stalled_rank(
                    f"hvd-linreg: error: [rank {self.rank}] no training progress for "
                    f"{idle:.0f} s: another rank is stuck or dead; ending the job "
                    "(HOROVOD_STALL_SHUTDOWN_TIME_SECONDS sets the limit)"
                )


def init(
    verbose: bool = False, elastic: bool = False, own_process: bool = True, horovod: bool = True
) -> Job:
    """Describe this process's place in the job, with the means of its collectives.

    horovod: the run needs Horovod (SGD): start it, and TensorFlow. An exact run needs neither:
    under an MPI launcher (mpirun, srun, horovodrun's MPI mode) its collectives are MPI's
    through mpi4py, and in one process there are none. Horovod makes them all the same under a
    Gloo launch (horovodrun --gloo), and where the caller's script has started it.
    Elastic jobs describe the job later (current_job, inside hvd.elastic.run): a worker that
    joins a running job must make no collective call before it has synchronised with the others.
    own_process: the tool runs the process (the command line), so it may set SIGTERM's handler;
    a library call (hvd_linreg.fit) in the caller's script leaves it as the caller has it."""
    if job_size() > 1:
        # Horovod's background thread batches requests every HOROVOD_CYCLE_TIME ms (default 1),
        # and each step's allreduce waited for it; 0 starts it at once. One rank never
        # allreduces, and there the spinning thread would only take the training's core.
        # (docs/performance.md: what each of these defaults is worth.)
        os.environ.setdefault("HOROVOD_CYCLE_TIME", "0")
        # A rank waiting in MPI yields its core instead of busy-polling it: to the rank it waits
        # for when ranks outnumber cores, and to the training on a shared machine.
        os.environ.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    # A rank that stops taking part (stuck in I/O, SIGSTOPped, a livelock) must end the job,
    # not hang it: Horovod warns after STALL_CHECK seconds and shuts down after
    # STALL_SHUTDOWN (mpi4py's collectives keep the same limit). Both are overridable from
    # the environment.
    for name, seconds in STALL_DEFAULTS.items():
        os.environ.setdefault(name, str(seconds))
    if horovod or elastic or gloo_launch() or horovod_started():
        return _horovod_init(verbose, elastic, own_process)
    stall_limit_s = float(os.environ["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"])
    here = (socket.gethostname(), machine_id())
    job = Job(0, 1, "none", stall_limit_s, (here[0],), verbose, thread_budget(1))
    if job_size() > 1:
        mpi = MpiCollectives(stall_limit_s)
        hosts = mpi.allgather(here)
        check_distinct_hosts(hosts)
        job = replace(
            job,
            rank=mpi.comm.Get_rank(),
            size=mpi.comm.Get_size(),
            controller=mpi.name,
            hosts=tuple(name for name, _ in hosts),
            threads=thread_budget(local_size()),
            collectives=mpi,
        )
    return replace(job, python_warnings=not own_process)


def _bounded_start(start) -> None:
    """start() (Horovod's, whose MPI_Init or rendezvous waits for every rank), ended with this
    rank's error line after the stall limit: a rank that never starts (seen: one whose MPI
    start failed, Open MPI's PMIx server unreachable under heavy load) must not leave the
    others, and the launcher, waiting for ever. ctypes releases the GIL while Horovod starts."""
    limit_s = float(os.environ["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"])
    line = (
        f"hvd-linreg: error: [rank {launch_rank()}] Horovod did not start within {limit_s:.0f} s: "
        "another rank failed to start or is stuck (the launcher's lines may say why); ending "
        "the job (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS sets the limit)"
    )
    bounded(limit_s, lambda: end_stalled_rank(line), start)


def horovod_started() -> bool:
    """Whether Horovod runs in this process already (an earlier fit, or the caller's script)."""
    hvd = sys.modules.get("horovod.tensorflow")
    return hvd is not None and hvd.is_initialized()


def _horovod_init(verbose: bool, elastic: bool, own_process: bool) -> Job:
    """Start Horovod and TensorFlow (a no-op where the caller's script has)."""
    import_tensorflow()
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from hvd_linreg.runtime.startup import horovod_functions_without_autograph

    horovod_functions_without_autograph()
    tf.get_logger().setLevel("ERROR")
    if own_process and not elastic:
        _bounded_start(hvd.init)
    else:  # a caller's script, or an elastic worker that waits for its hosts: not ours to end
        hvd.init()  # a no-op where the caller's script has called it
    threads = thread_budget(hvd.local_size())
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:  # the caller's TensorFlow has started with its own: they stay
        pass
    if elastic:
        return _job(hosts=(), verbose=verbose)
    if own_process and hvd.gloo_enabled() and hvd.rank() == 0 and hvd.size() > 1:
        speak_before_terminating()
    return replace(current_job(verbose), python_warnings=not own_process)


# How long rank 0 lives on after a SIGTERM under Gloo (horovodrun --gloo; the elastic driver
# handles its own workers).
TERMINATE_GRACE_S = 2.0


def speak_before_terminating() -> None:
    """Let rank 0 say why the job ends before the launcher's SIGTERM ends it.

    When a rank dies, horovodrun --gloo terminates the others at once, and rank 0 is killed in
    the very moment its collective fails, before "the job lost a rank" is written. Given a
    moment, the failed collective returns, rank 0 says so and exits 1. A SIGTERM
    in a healthy job (the user's, or a scheduler's) still ends it, TERMINATE_GRACE_S later; a
    rank stuck inside a collective gets the launcher's SIGKILL as before. Gloo only: under MPI
    the launcher names the lost rank itself, and a rank waiting in MPI never returns to Python,
    where this handler runs.
    """
    exit_on_sigterm(128 + signal.SIGTERM, after_s=TERMINATE_GRACE_S)


def exit_on_sigterm(code: int, after_s: float = 0.0) -> None:
    """From now on the launcher's SIGTERM ends this rank with `code`, after_s seconds later (the
    rank goes on meanwhile), skipping Python's teardown: that takes seconds, TensorFlow's, and
    puts SIGTERM's default back first."""

    def on_terminate(_signum, _frame):
        if after_s <= 0:
            os._exit(code)
        timer = threading.Timer(after_s, os._exit, args=(code,))
        timer.daemon = True
        timer.start()

    signal.signal(signal.SIGTERM, on_terminate)


def broadcast_object(obj, name: str | None = None):
    """Rank 0's value of obj on every rank, with no Job yet: elastic.py's state broadcasts."""
    import horovod.tensorflow as hvd

    return hvd.broadcast_object(obj, root_rank=0, name=name)


def restart() -> None:
    """An elastic reset: a new rendezvous, where the ranks, the rank count and rank 0 may all
    change."""
    import horovod.tensorflow as hvd

    hvd.shutdown()
    hvd.init()


def current_job(verbose: bool = False) -> Job:
    """The job as Horovod now sees it (again after an elastic reset), with every rank's host."""
    import horovod.tensorflow as hvd

    # Each rank's host once, for the report, and to catch two hosts with one name that got this
    # far. Not by Horovod's cross_rank: it numbers the ranks of each local rank, so on hosts
    # with unequal slots one host's ranks can have different ones (elastic jobs order their
    # hosts at random, and node2:1,node1:2 was taken for two hosts called node1).
    here = (socket.gethostname(), machine_id())
    hosts = hvd.allgather_object(here, name="hosts") if hvd.size() > 1 else [here]
    check_distinct_hosts(hosts)
    return _job(tuple(name for name, _ in hosts), verbose)


def _job(hosts: tuple[str, ...], verbose: bool) -> Job:
    import horovod.tensorflow as hvd

    controller = "Gloo" if hvd.gloo_enabled() else "MPI"
    return Job(
        rank=hvd.rank(),
        size=hvd.size(),
        controller=controller,
        stall_limit_s=float(os.environ["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"]),
        hosts=hosts,
        verbose=verbose,
        threads=thread_budget(hvd.local_size()),
        collectives=HorovodCollectives(controller),
    )
