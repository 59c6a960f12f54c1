"""What this host gives a rank: its share of the memory and of the cores. The ranks on a
host share both; the launcher says how many there are (launcher.py)."""

from __future__ import annotations

import os

from hvd_linreg.runtime.launcher import local_size


def memory_per_rank() -> int:
    """Bytes of memory this rank may use: HVD_LINREG_RANK_MEMORY if set, else the memory
    available on this host, or its cgroup's limit if lower, shared by the ranks on this host."""
    given = os.environ.get("HVD_LINREG_RANK_MEMORY", "")
    if given.isdigit():
        return int(given)
    with open("/proc/meminfo") as f:
        available = next(int(line.split()[1]) * 1024 for line in f if "MemAvailable" in line)
    limit = min([available, *_cgroup_limits()])
    return limit // local_size()


def bytes_text(count: int) -> str:
    """Bytes as a message gives them: in MiB, or GiB from one."""
    return f"{count / 2**30:.1f} GiB" if count >= 2**30 else f"{count / 2**20:.1f} MiB"


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


def thread_budget(local_size: int) -> int:
    """TensorFlow threads for one of local_size ranks sharing this machine.

    Without a limit each rank starts one thread per core and they trample each other. Each
    takes its even share of the machine's cores, and no more than it may run on: a launcher
    that binds ranks (mpirun --bind-to core, srun --cpus-per-task) or taskset gives it fewer.
    """
    share = (os.cpu_count() or 1) // local_size
    return max(1, min(share, len(os.sched_getaffinity(0))))
