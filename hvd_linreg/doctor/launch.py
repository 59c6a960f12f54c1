"""The doctor's launch test: can a launcher really start ranks that allreduce together?"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time

import psutil  # a Horovod dependency

from hvd_linreg.doctor.check import INSTALL_MPI, INSTALL_PACKAGES, Check, first_line

RANKS = 2
# Open MPI settings of the network (interfaces, keep-alives), which the launch checks keep.
USER_MCA = ("OMPI_MCA_btl_", "OMPI_MCA_oob_")

# Each rank adds rank + 1, so the sum is 3 only if both ranks took part in a real allreduce.
# Only rank 0 prints, in one write (print() makes two when PYTHONUNBUFFERED is set), so the
# launchers' output tagging cannot split the line.
ALLREDUCE_SCRIPT = """\
import sys
import horovod.tensorflow as hvd
import tensorflow as tf
hvd.init()
total = hvd.allreduce(tf.constant(hvd.rank() + 1), op=hvd.Sum)
if hvd.rank() == 0:
    over = "Gloo" if hvd.gloo_enabled() else "MPI"
    sys.stdout.write(f"doctor-allreduce size={hvd.size()} sum={int(total)} over={over}\\n")
    sys.stdout.flush()
"""
ALLREDUCE_RESULT = re.compile(r"doctor-allreduce size=(\d+) sum=(\d+) over=(\w+)")


def expected_sum(ranks: int) -> int:
    return sum(rank + 1 for rank in range(ranks))


# Launch failures we recognise in the launcher's output: (text, how to fix it).
KNOWN_LAUNCH_PROBLEMS = (
    (
        "attempt to run as root",
        "as root, add --allow-run-as-root to mpirun "
        "(or export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)",
    ),
    (
        "not enough slots",
        "add --oversubscribe to mpirun, or give the host more slots (-H localhost:2)",
    ),
    ("No module named", INSTALL_PACKAGES),
)


def mpirun_command(mpirun: str, ranks: int = RANKS) -> list[str]:
    """The mpirun command line that starts this many ranks on this machine."""
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    # Open MPI refuses more ranks than cores unless told to share them.
    oversubscribe = ["--oversubscribe"] if (os.cpu_count() or 1) < ranks else []
    return [mpirun, *root, *oversubscribe, "-np", str(ranks)]


def check_launch(launcher: list[str], timeout: float, ranks: int = RANKS) -> Check:
    """Start the ranks with this launcher; each adds rank + 1 in a real allreduce."""
    name = os.path.basename(launcher[0])
    command = shlex.join([name, *launcher[1:]])
    by_hand = f"{command} hvd-linreg --num_steps 10"
    start = time.monotonic()
    try:
        output, returncode = _run_allreduce(launcher, timeout)
    except OSError as e:
        fix = INSTALL_MPI if name == "mpirun" else INSTALL_PACKAGES
        return Check(f"{name} cannot start {ranks} ranks", False, first_line(e), fix)
    except subprocess.TimeoutExpired:
        return Check(
            f"{name} cannot start {ranks} ranks",
            False,
            f"timed out after {timeout:g} s",
            "if this machine is busy, retry with a larger --timeout; otherwise see where it "
            f"hangs: {by_hand}",
        )
    took = time.monotonic() - start

    found = ALLREDUCE_RESULT.search(output)
    total = expected_sum(ranks)
    if returncode == 0 and found and found.group(1, 2) == (str(ranks), str(total)):
        return Check(
            f"{name} starts {ranks} ranks",
            True,
            f"{command}: allreduce over {found.group(3)} gave {total} in {took:.1f} s",
        )
    seen, fix = diagnose(output)
    if found:  # the ranks ran, but not as one job of all of them
        seen = f"allreduce over {found.group(1)} ranks gave {found.group(2)}"
    return Check(
        f"{name} cannot start {ranks} ranks",
        False,
        f"exit code {returncode}: {seen}",
        fix or f"run it by hand to see the whole error: {by_hand}",
    )


def _run_allreduce(launcher: list[str], timeout: float) -> tuple[str, int]:
    """The launcher's output and exit code for ALLREDUCE_SCRIPT. OSError when it cannot start;
    subprocess.TimeoutExpired once it has run too long, and was killed with its ranks."""
    # OMPI_*/PMIX_* variables that a launcher or an MPI_Init left here (doctor run as a rank,
    # from a test) would make the new mpirun join that old job instead of starting its own.
    # Launchers never set the network's (btl_*, oob_*): those are the user's, and kept.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OMPI_", "PMIX_")) or k.startswith(USER_MCA)
    }
    proc = subprocess.Popen(
        [*launcher, sys.executable, "-c", ALLREDUCE_SCRIPT],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(proc.pid)
        proc.communicate()
        raise
    return output, proc.returncode


# How long the killed ranks of a launch that hung may take to end.
KILLED_WITHIN_S = 10


def _kill_tree(pid: int) -> None:
    """Kill a launcher and every process under it: Open MPI puts each rank in its own process
    group, so killing the launcher's group would leave the ranks running."""
    launcher = psutil.Process(pid)
    below = launcher.children(recursive=True)
    for process in [*below, launcher]:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    # A killed rank ends a moment later, longer on a busy machine: wait for it, so that none is
    # left when the check returns. Not for the launcher: it is this process's child, whose exit
    # code the caller reads; a wait here would reap it first.
    psutil.wait_procs(below, timeout=KILLED_WITHIN_S)


def diagnose(output: str) -> tuple[str, str | None]:
    """The line of a launcher's output that best says what went wrong, and its fix if known."""
    lines = [line.strip() for line in output.splitlines() if line.strip(" -")]
    for text, fix in KNOWN_LAUNCH_PROBLEMS:
        for line in lines:
            if text in line:
                return line[:200], fix
    errors = [line for line in lines if "rror" in line]
    return (errors or lines or ["no output"])[-1][:200], None
