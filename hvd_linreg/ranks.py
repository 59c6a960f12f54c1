"""Everything about ranks in one place: who am I, how many are we, who speaks, how we agree.

This is the only module that reads the launcher's environment or starts Horovod.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hvd_linreg.config import UsageError
from hvd_linreg.startup import import_tensorflow

if TYPE_CHECKING:
    import numpy as np

# Launchers announce the rank before any MPI call; we need it to keep non-root ranks quiet
# when the command line is rejected before Horovod starts.
_RANK_VARIABLES = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
_SIZE_VARIABLES = ("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
# Ranks on this host: fewer than the job's size means the job spans several hosts.
_LOCAL_SIZE_VARIABLES = ("HOROVOD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS")
_LOCAL_RANK_VARIABLES = (
    "HOROVOD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "SLURM_LOCALID",
)
# srun starts the ranks itself and tells each the nodes of its step, not the ranks per node.
# Only a step's tasks have it: a batch script's SLURM_NNODES is the allocation's, which a job
# that horovodrun or mpirun starts inside it may not span.
_SLURM_STEP_NODES = ("SLURM_STEP_NUM_NODES",)


def _launcher_value(names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return default


STALL_DEFAULTS = {
    "HOROVOD_STALL_CHECK_TIME_SECONDS": 30,
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": 120,
}


def memory_per_rank() -> int:
    """Bytes of memory this rank may use: HVD_LINREG_RANK_MEMORY if set, else the memory
    available on this host, or its cgroup's limit if lower, shared by the ranks on this host."""
    given = os.environ.get("HVD_LINREG_RANK_MEMORY", "")
    if given.isdigit():
        return int(given)
    with open("/proc/meminfo") as f:
        available = next(int(line.split()[1]) * 1024 for line in f if "MemAvailable" in line)
    limit = min([available, *_cgroup_limits()])
    return limit // _launcher_value(_LOCAL_SIZE_VARIABLES, 1)


def _cgroup_limits() -> list[int]:
    """The memory limits of this process's cgroup (v2 memory.max, v1 memory.limit_in_bytes)."""
    limits = []
    try:
        with open("/proc/self/cgroup") as f:
            entries = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return limits
    for _, controllers, path in entries:
        if controllers == "":
            candidates = [f"/sys/fs/cgroup{path}/memory.max"]
        elif "memory" in controllers.split(","):
            candidates = [f"/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"]
        else:
            continue
        for candidate in candidates:
            try:
                with open(candidate) as f:
                    value = f.read().strip()
            except OSError:
                continue
            if value.isdigit():
                limits.append(int(value))
    return limits


def launch_rank() -> int:
    """This process's rank as the launcher set it, or 0 when started without one."""
    return _launcher_value(_RANK_VARIABLES, 0)


class HostError(UsageError):
    """A usage error of this host, found before Horovod starts: only the ranks on this host
    see it and cannot tell the others, so the first rank on the host speaks for it."""


def speaks_for(error: BaseException | None = None) -> bool:
    """Whether this rank prints the job's one error line (rank 0, or the host's first rank)."""
    if isinstance(error, HostError):
        return _launcher_value(_LOCAL_RANK_VARIABLES, 0) == 0
    return launch_rank() == 0


def say(line: str, *, stream=None) -> None:
    """Write one whole line: Open MPI's output tagging splits multi-part prints."""
    stream = stream or sys.stdout
    stream.write(line + "\n")
    stream.flush()


@dataclass(frozen=True)
class Job:
    """The job as this process sees it: its rank, how many there are, who speaks, how they
    agree."""

    rank: int
    size: int
    controller: str  # "MPI" or "Gloo"
    stall_limit_s: float  # HOROVOD_STALL_SHUTDOWN_TIME_SECONDS; 0 turns the watchdog off
    hosts: tuple[str, ...] = ()  # each rank's host name, by rank
    verbose: bool = False
    threads: int = 1  # the cores this rank may use (thread_budget): building data uses them

    @property
    def is_root(self) -> bool:
        return self.rank == 0

    def log(self, line: str) -> None:
        """Rank 0 speaks for the job; other ranks only with --verbose, tagged with their rank."""
        if self.is_root:
            say(line)
        elif self.verbose:
            say(f"[rank {self.rank}] {line}")

    def warn(self, line: str) -> None:
        if self.is_root:
            say(f"warning: {line}", stream=sys.stderr)

    def broadcast(self, obj):
        """Rank 0's value of obj, on every rank."""
        import horovod.tensorflow as hvd

        return hvd.broadcast_object(obj, root_rank=0) if self.size > 1 else obj

    def allgather(self, obj, name: str | None = None) -> list:
        """Every rank's value of obj, by rank, on every rank."""
        import horovod.tensorflow as hvd

        return hvd.allgather_object(obj, name=name) if self.size > 1 else [obj]

    def allgather_rows(self, rows: np.ndarray, name: str) -> np.ndarray:
        """Every rank's rows (a 2-D array of one width), stacked in rank order, on every rank:
        as a tensor, not pickled as allgather's objects are."""
        if self.size == 1:
            return rows
        import horovod.tensorflow as hvd
        import tensorflow as tf

        return hvd.allgather(tf.constant(rows), name=name).numpy()

    def alltoall(self, rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Send counts[r] consecutive rows to rank r (in rank order); return the rows every rank
        sent here, concatenated by sending rank."""
        if self.size == 1:
            return rows
        import horovod.tensorflow as hvd
        import tensorflow as tf

        received, _ = hvd.alltoall(tf.constant(rows), splits=tf.constant(counts, tf.int32))
        return received.numpy()

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
    TensorFlow error is a bug and keeps its traceback."""
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
    hvd = sys.modules.get("horovod.tensorflow")  # not imported: the error came before init
    if hvd is not None and hvd.is_initialized():
        if hvd.size() > 1:
            hvd.join()
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
                say(
                    f"hvd-linreg: error: [rank {self.rank}] no training progress for "
                    f"{idle:.0f} s: another rank is stuck or dead; ending the job "
                    "(HOROVOD_STALL_SHUTDOWN_TIME_SECONDS sets the limit)",
                    stream=sys.stderr,
                )
                os._exit(1)  # no clean shutdown: it would wait on the stuck rank forever


def thread_budget(local_size: int) -> int:
    """TensorFlow threads for one of local_size ranks sharing this machine.

    Without a limit each rank starts one thread per core and they trample each other. Each
    takes its even share of the machine's cores, and no more than it may run on: a launcher
    that binds ranks (mpirun --bind-to core, srun --cpus-per-task) or taskset gives it fewer.
    """
    share = (os.cpu_count() or 1) // local_size
    return max(1, min(share, len(os.sched_getaffinity(0))))


def check_host_name() -> None:
    """Refuse, before Horovod starts, a host name that would crash or hang the job.

    Gloo binds each rank to the address its host's name resolves to (not to the interface
    horovodrun chose): a name that does not resolve kills every rank with SIGSEGV, a loopback
    address leaves the other hosts connecting to themselves, and another host's address (two
    hosts with one name) cannot be bound. Open MPI takes two hosts with one name for one host and
    crashes in its first collective. Each is seen by the ranks on the bad host alone.
    """
    size = _launcher_value(_SIZE_VARIABLES, 1)
    local_size = _launcher_value(_LOCAL_SIZE_VARIABLES, 0)
    if local_size:
        spans_hosts = local_size < size
    else:  # srun, or no launcher
        spans_hosts = _launcher_value(_SLURM_STEP_NODES, 1) > 1
    gloo = "HOROVOD_GLOO_RENDEZVOUS_ADDR" in os.environ
    if size > 1:
        problem = host_name_problem(spans_hosts, gloo)
        if problem:
            raise HostError(problem)


def host_name_problem(spans_hosts: bool, gloo: bool) -> str | None:
    """What is wrong with this host's name for a job of several ranks, and how to fix it."""
    if not (spans_hosts or gloo):
        return None  # one host under MPI: the name is never looked up
    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
    except OSError:
        return (
            f"this host's name {name!r} does not resolve to an address, and Horovod needs it for "
            f"a job across hosts or under Gloo: add the line '<its address> {name}' to /etc/hosts "
            "on this host (127.0.1.1 will do on one machine), or give it a DNS entry"
        )
    if not spans_hosts:
        return None
    if ipaddress.ip_address(address).is_loopback:
        return (
            f"this host's name {name!r} resolves to {address}, a loopback address, but the job "
            f"spans several hosts and the others cannot reach {name} there: in /etc/hosts on "
            f"{name}, put {name} on the line of its network address, not {address}"
        )
    if not _is_own_address(address):
        return (
            f"this host's name {name!r} resolves to {address}, which is not an address of this "
            "host: another host has the same name (a cloned image or container?) or the entry is "
            "stale. Give each host its own name (hostnamectl set-hostname NAME) and an /etc/hosts "
            "or DNS entry with its own address"
        )
    return None


def _is_own_address(address: str) -> bool:
    """Whether this host has the address: only then can a socket be bound to it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind((address, 0))
        except OSError:
            return False
    return True


def machine_id() -> str:
    """What tells this host from another whatever their names: the kernel's boot id (one per
    machine) and the network namespace (one per container or namespaced host)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/net')}"
    except OSError:  # not Linux: names are all there is
        return socket.gethostname()


def check_distinct_hosts(hosts: list[tuple[str, str]]) -> None:
    """Refuse two hosts of the job with one name: (name, machine_id()) of every rank."""
    seen: dict[str, str] = {}
    for name, host in hosts:
        if seen.setdefault(name, host) != host:
            raise UsageError(
                f"two hosts of this job are both called {name!r}: give each host its own name "
                "(hostnamectl set-hostname NAME), with its own address in /etc/hosts or DNS"
            )


def check_elastic_launch(elastic: bool) -> None:
    """Refuse --elastic without an elastic launch, and an elastic launch without --elastic:
    either way a lost rank would end or restart the run instead of the job going on."""
    launched_elastic = os.environ.get("HOROVOD_ELASTIC") == "1"  # horovodrun's elastic driver
    if elastic and not launched_elastic:
        raise UsageError(
            "--elastic needs Horovod's elastic launcher: horovodrun -np N --min-np M "
            "--host-discovery-script SCRIPT hvd-linreg --elastic (README, Elastic)"
        )
    if launched_elastic and not elastic:
        raise UsageError(
            "horovodrun started this job in elastic mode (--host-discovery-script or --min-np): "
            "add --elastic, so that a lost rank does not end the run"
        )


def init(verbose: bool = False, elastic: bool = False) -> Job:
    """Start Horovod (and TensorFlow) and describe this process's place in the job.

    Elastic jobs describe it later (current_job, inside hvd.elastic.run): a worker that joins
    a running job must make no collective call before it has synchronised with the others."""
    if _launcher_value(_SIZE_VARIABLES, 1) > 1:
        # Horovod's background thread batches requests every HOROVOD_CYCLE_TIME ms (default 1),
        # and each step's allreduce waited for it; 0 starts it at once. One rank never
        # allreduces, and there the spinning thread would only take the training's core.
        # (README, Performance: what each of these defaults is worth.)
        os.environ.setdefault("HOROVOD_CYCLE_TIME", "0")
        # A rank waiting in MPI yields its core instead of busy-polling it: to the rank it waits
        # for when ranks outnumber cores, and to the training on a shared machine.
        os.environ.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    # A rank that stops taking part (stuck in I/O, SIGSTOPped, a livelock) must end the job,
    # not hang it: Horovod warns after STALL_CHECK seconds and shuts down after
    # STALL_SHUTDOWN. Both are overridable from the environment.
    for name, seconds in STALL_DEFAULTS.items():
        os.environ.setdefault(name, str(seconds))
    import_tensorflow()
    import horovod.tensorflow as hvd
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    hvd.init()
    threads = thread_budget(hvd.local_size())
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    if elastic:
        return _job(hosts=(), verbose=verbose)
    return current_job(verbose)


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

    return Job(
        rank=hvd.rank(),
        size=hvd.size(),
        controller="Gloo" if hvd.gloo_enabled() else "MPI",
        stall_limit_s=float(os.environ["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"]),
        hosts=hosts,
        verbose=verbose,
        threads=thread_budget(hvd.local_size()),
    )
