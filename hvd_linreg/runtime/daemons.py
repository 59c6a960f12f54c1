"""Ending the Open MPI process that started this rank when it waits for a host that is gone.

When a host drops off the network, the watchdog (ranks.Watchdog) ends the ranks on every host,
but Open MPI's mpirun then waits for the lost host's daemon, and that daemon for mpirun, for as
long as TCP takes to give up (many minutes without Open MPI's keep-alives). So, as its rank
ends, the watchdog leaves behind a small process of its own session that waits GRACE_S (the
time an ordinary end of the job takes) and then ends the parent if it is still there: mpirun
with SIGKILL, after which the ssh sessions it started to the other hosts go too, and a host's
daemon (orted) with SIGTERM, which ends its ranks and itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# Open MPI 4's names (mpirun is orterun); Open MPI 5's are prterun and prted.
LAUNCHERS = {"mpirun", "mpiexec", "orterun", "prterun"}
HOST_DAEMONS = {"orted", "prted"}
# Longer than the launcher takes to end the job by itself once a rank exited (about 1 s here);
# the job then ends within the stall limit + GRACE_S + a second or two.
GRACE_S = 10.0


def end_parent_if_it_hangs(grace_s: float = GRACE_S) -> None:
    """If an Open MPI launcher or daemon started this rank, start the process that ends it
    should it outlive this rank by grace_s; under any other launcher, nothing."""
    parent = os.getppid()
    name = _name(parent)
    if name in LAUNCHERS or name in HOST_DAEMONS:
        subprocess.Popen(
            [sys.executable, "-m", "hvd_linreg.runtime.daemons", str(parent), name, str(grace_s)],
            start_new_session=True,  # outlives this rank, and what ends the rank's group
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # holds none of the launcher's pipes open
            stderr=subprocess.DEVNULL,
        )


def end_stalled_rank(line: str) -> None:
    """End this rank, which waited too long for another: its error line on stderr in one
    write, the launcher ended too should it wait for a lost host, then exit 1 at once (a
    clean shutdown would wait on the stuck rank for ever)."""
    os.write(sys.stderr.fileno(), (line + "\n").encode())
    end_parent_if_it_hangs()
    os._exit(1)


def _name(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def _children(pid: int, name: str) -> list[int]:
    """The processes called name whose parent is pid."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _name(int(entry.name)) == name:
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _end(pid: int, name: str, grace_s: float) -> None:
    time.sleep(grace_s)
    if _name(pid) != name:
        return  # it ended by itself (the pid would have to be reused under the same name)
    if name in HOST_DAEMONS:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)  # the daemon ends its remaining ranks, then itself
        return
    # mpirun crashes (SIGSEGV in PMIx_Finalize) when signalled in the middle of its own abort:
    # SIGKILL instead, then its ssh sessions, which would wait for the lost host as it did.
    sessions = _children(pid, "ssh")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    for session in sessions:
        with contextlib.suppress(ProcessLookupError):
            os.kill(session, signal.SIGTERM)


if __name__ == "__main__":
    _end(int(sys.argv[1]), sys.argv[2], float(sys.argv[3]))
