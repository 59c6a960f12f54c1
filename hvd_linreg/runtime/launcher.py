"""What the launcher (horovodrun, mpirun, srun) tells a rank before Horovod starts: its rank,
the job's size, the ranks on its host. This module alone reads the launcher's environment;
the rest ask ranks.Job once Horovod runs.
"""

from __future__ import annotations

import os

from hvd_linreg.errors import HostError

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


def launch_rank() -> int:
    """This process's rank as the launcher set it, or 0 when started without one."""
    return _launcher_value(_RANK_VARIABLES, 0)


def speaks_for(error: BaseException | None = None) -> bool:
    """Whether this rank prints the job's one error line (rank 0, or the host's first rank)."""
    if isinstance(error, HostError):
        return _launcher_value(_LOCAL_RANK_VARIABLES, 0) == 0
    return launch_rank() == 0


def job_size() -> int:
    """The job's rank count as the launcher set it, or 1."""
    return _launcher_value(_SIZE_VARIABLES, 1)


def spans_hosts() -> bool:
    """Whether the job's ranks run on more than one host."""
    size = job_size()
    local_size = _launcher_value(_LOCAL_SIZE_VARIABLES, 0)
    if local_size:
        return local_size < size
    return _launcher_value(_SLURM_STEP_NODES, 1) > 1  # srun, or no launcher


def local_size() -> int:
    """The ranks on this host as the launcher set it, or 1."""
    return _launcher_value(_LOCAL_SIZE_VARIABLES, 1)


def gloo_launch() -> bool:
    """Whether horovodrun started this rank with its Gloo controller (--gloo, or elastic): its
    collectives are then Horovod's, MPI being absent."""
    return bool(os.environ.get("HOROVOD_GLOO_RENDEZVOUS_ADDR"))
