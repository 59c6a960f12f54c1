"""A dead, stuck or interrupted rank ends the whole job quickly; it never hangs.

Exit codes and messages are asserted as each launcher really gives them (measured here with
Open MPI 4.1 and Horovod 0.28.1): under the MPI launchers mpirun ends the job itself when a
rank dies, before the tool can speak."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import threading
import time

import psutil
import pytest

from conftest import LAUNCH_TIMEOUT_S, job_tag, kill_tree, launch, launch_command, launcher_env

pytestmark = pytest.mark.multiprocess

FOREVER = ["--num_steps", "100000000", "--log_every", "100"]  # hours: only a fault ends it
# Safety net for a job that should end at once: the launchers tear down in about a second.
ENDS_WITHIN_S = 30
# Open MPI 4's mpirun, or Open MPI 5's (prterun, which wraps the line).
MPIRUN_NOTICED = (
    r"(?:mpirun|prterun) noticed that process rank 1 with PID \d+ on node \S+ exited on\s+signal 9"
)

# launcher -> (its exit code, the line that says why), after kill -9 of rank 1
KILLED_RANK = {
    # Gloo: rank 0's allreduce fails, the tool says so and exits 1; horovodrun exits 1. The
    # tool writes its line whole, but Horovod's C++ log shares rank 0's stderr and writes its
    # pieces unbuffered: one can land at the start of the tool's line ("[0]<stderr>:[hvd-...",
    # seen once in a clean root), so the line is matched after its rank's prefix, anywhere.
    "horovodrun-gloo": (
        1,
        r"(?m)^\[0\]<stderr>:.{0,80}?hvd-linreg: error: the job lost a rank \(.+\)$",
    ),
    # MPI: mpirun ends the other ranks itself and exits 128 + 9, the killed rank's signal.
    "horovodrun-mpi": (137, MPIRUN_NOTICED),
    "mpirun": (137, MPIRUN_NOTICED),
}


# The core (every other Python) kills a rank under horovodrun, MPI and Gloo: mpirun's own
# handling of the loss is Open MPI's, the same on every Python.
@pytest.mark.parametrize(
    "launcher",
    [pytest.param(name, marks=[pytest.mark.core] * (name != "mpirun")) for name in KILLED_RANK],
)
def test_killed_rank_ends_the_job(launcher, start_job):
    job = start_job(launcher, 2, FOREVER)
    job.wait_for("Step: 100 ")
    job.ranks()[1].kill()
    code = job.wait(ENDS_WITHIN_S)
    assert code is not None, (
        f"still running {ENDS_WITHIN_S} s after a rank was killed:\n{job.output}"
    )
    expected_code, says = KILLED_RANK[launcher]
    assert code == expected_code, job.output
    assert re.search(says, job.output), job.output
    assert not job.ranks(), "ranks outlived the job"


def test_stuck_rank_ends_the_job_with_exit_1(start_job):
    """A SIGSTOPped rank never reaches the next allreduce: rank 0's watchdog ends it."""
    limit = 5
    env = {
        "HOROVOD_STALL_CHECK_TIME_SECONDS": "2",
        "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": str(limit),
    }
    job = start_job("mpirun", 2, FOREVER, env)
    job.wait_for("Step: 500 ")
    # The watchdog's documented limit: max(limit, 10 x the slowest stretch so far), checked
    # every second; then mpirun needs a moment to end the job.
    window = max(limit, 10 * job.slowest_stretch()) + ENDS_WITHIN_S
    job.ranks()[1].send_signal(signal.SIGSTOP)
    code = job.wait(window)
    assert code is not None, f"a stuck rank hung the job for {window:.0f} s:\n{job.output}"
    assert code == 1, job.output
    assert re.search(
        r"hvd-linreg: error: \[rank 0\] no training progress for \d+ s: another rank is stuck "
        r"or dead; ending the job \(HOROVOD_STALL_SHUTDOWN_TIME_SECONDS sets the limit\)",
        job.output,
    ), job.output


def test_ctrl_c_of_one_rank_says_interrupted_and_exits_130(start_job):
    job = start_job("python", 1, FOREVER)
    job.wait_for("Step: 100 ")
    os.killpg(job.proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    assert job.wait(ENDS_WITHIN_S) == 130, job.output
    assert job.output.splitlines()[-1] == "hvd-linreg: interrupted"


# launcher -> its exit code after Ctrl-C. Under a launcher the ranks do not get the SIGINT
# themselves: the launcher ends them (SIGTERM), so none says "interrupted" and none exits 130.
CTRL_C = {"horovodrun-gloo": 1, "horovodrun-mpi": -signal.SIGINT, "mpirun": 1}


@pytest.mark.parametrize("launcher", list(CTRL_C))
def test_ctrl_c_ends_every_rank(launcher, start_job):
    job = start_job(launcher, 2, FOREVER)
    job.wait_for("Step: 100 ")
    os.killpg(job.proc.pid, signal.SIGINT)
    assert job.wait(ENDS_WITHIN_S) == CTRL_C[launcher], job.output
    assert not job.ranks(), "ranks outlived Ctrl-C"


def test_a_command_horovodrun_terminates_is_never_reported_as_a_success():
    """horovodrun ends each rank's command (on Ctrl-C, or when a rank fails under Gloo) through
    safe_shell_exec, whose exit code becomes the job's. Unpatched, it can report a terminated
    command as exit 0 (a race): the job that was interrupted exits as if it had succeeded
    (ci/horovod-patches/11-terminated-exit-code.patch). A terminated command exits 143; 137
    where Horovod's SIGKILL came first (a shell stopped before its command started)."""
    from horovod.runner.common.util import safe_shell_exec

    codes = []
    for _ in range(12):
        terminate = threading.Event()
        threading.Timer(0.2, terminate.set).start()
        codes.append(safe_shell_exec.execute("sleep 60", events=[terminate]))
    assert set(codes) <= {128 + signal.SIGTERM, 128 + signal.SIGKILL}, codes


def test_stall_shutdown_time_0_turns_the_watchdog_off(start_job):
    """A paused rank then only pauses the job: nothing ends it, and it trains on when the
    rank is continued."""
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "2", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "0"}
    job = start_job("mpirun", 2, FOREVER, env)
    job.wait_for("Step: 500 ")
    # Longer than a watchdog that took 0 for its limit would wait: 10 x the slowest stretch.
    window = 10 * job.slowest_stretch() + ENDS_WITHIN_S
    stuck = job.ranks()[1]
    stuck.send_signal(signal.SIGSTOP)
    assert job.wait(window) is None, f"the job ended with the watchdog off:\n{job.output}"
    assert "no training progress" not in job.output
    logged = len(job.lines)
    stuck.send_signal(signal.SIGCONT)
    job.wait_for("Step: ", after=logged)


def test_output_into_head_under_mpirun_ends_every_rank(tmp_path):
    """`mpirun ... hvd-linreg | head`: mpirun reads the ranks' output, so it is mpirun that
    meets the closed pipe; it dies (Open MPI 4.1 crashes on it: exit 139 and its backtrace)
    and takes every rank with it. The ranks train no further, and none is left."""
    tag = job_tag(tmp_path, "head-tag")  # tells this job's ranks from any other process
    tool = [*launch_command("mpirun", 2), "--num_steps", "100000000", "--log_every", "1"]
    codes = tmp_path / "codes"
    script = f"{shlex.join([*tool, '--metrics_json', tag])} 2>/dev/null | head -n 3; "
    script += f"echo ${{PIPESTATUS[*]}} >{codes}"
    proc = subprocess.Popen(
        ["bash", "-c", script], stdout=subprocess.PIPE, text=True, env=launcher_env()
    )
    try:
        out, _ = proc.communicate(timeout=LAUNCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        raise
    lines = out.splitlines()
    assert lines[0].startswith("hvd-linreg: 2 ranks (MPI)"), lines
    assert [line.split(" Loss: ")[0] for line in lines[1:]] == ["Step: 1", "Step: 2"], lines
    mpirun_code, head_code = codes.read_text().split()
    assert head_code == "0" and mpirun_code != "0", codes.read_text()
    deadline = time.monotonic() + ENDS_WITHIN_S
    while _processes_with(tag) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _processes_with(tag), "ranks outlived mpirun"


def _processes_with(text: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if text in (p.info["cmdline"] or [])]


@pytest.mark.multiprocess
def test_a_rank_that_never_starts_ends_the_job_at_the_stall_limit(tmp_path):
    """Rank 1 never reaches MPI_Init (it sleeps instead of starting the tool), as a rank whose
    MPI start failed and hung in its exit did under load: rank 0, waiting in Horovod's start,
    ends the job after HOROVOD_STALL_SHUTDOWN_TIME_SECONDS with its line, and mpirun with it."""
    script = 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec sleep 600; fi; exec hvd-linreg "$@"'
    start = time.monotonic()
    run = launch(
        "mpirun",
        2,
        ["--num_steps", "10"],
        tmp_path,
        program=("sh", "-c", script, "sh"),
        env={"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "5"},
        metrics=False,
        timeout=90,
    )
    assert run.returncode != 0
    assert "[rank 0] Horovod did not start within 5 s" in run.output
    assert time.monotonic() - start < 60
