"""hvd_linreg/runtime/daemons.py, the watchdog's fallback for a launcher that waits for a lost
host, on stand-ins: copies of sh and sleep under Open MPI's names (a process's name is its
file's)."""

from __future__ import annotations

import shutil
import subprocess
import time

from hvd_linreg.runtime import daemons

WAIT_S = 30  # a safety net for processes that start or end at once, even on a busy machine;
# under the stand-in ssh's 60 s, so that its session ending by itself cannot pass for a kill


def stand_in(tmp_path, name: str, program: str):
    path = tmp_path / name
    shutil.copy(shutil.which(program), path)
    return path


def test_a_launcher_still_running_is_killed_and_its_ssh_sessions_ended(tmp_path):
    ssh = stand_in(tmp_path, "ssh", "sleep")
    mpirun = subprocess.Popen([stand_in(tmp_path, "mpirun", "sh"), "-c", f"{ssh} 60 & wait"])
    deadline = time.monotonic() + WAIT_S
    while not (session := daemons._children(mpirun.pid, "ssh")):
        assert time.monotonic() < deadline, f"the stand-in mpirun started no ssh in {WAIT_S} s"
        time.sleep(0.01)
    daemons._end(mpirun.pid, "mpirun", grace_s=0)
    assert mpirun.wait(WAIT_S) == -9
    subprocess.run(["sh", "-c", f"while kill -0 {session[0]} 2>/dev/null; do sleep 0.1; done"],
                   timeout=WAIT_S, check=True)  # fmt: skip


def test_a_host_daemon_still_running_gets_sigterm(tmp_path):
    orted = subprocess.Popen([stand_in(tmp_path, "orted", "sleep"), "60"])
    daemons._end(orted.pid, "orted", grace_s=0)
    assert orted.wait(WAIT_S) == -15


def test_a_process_of_another_name_under_the_pid_is_left_alone(tmp_path):
    other = subprocess.Popen(["sleep", "60"])
    try:
        daemons._end(other.pid, "mpirun", grace_s=0)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
