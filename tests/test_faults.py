"""A dead, stuck or interrupted rank ends the whole job quickly; it never hangs."""

from __future__ import annotations

import os
import signal
import time

import pytest

pytestmark = pytest.mark.multiprocess

FOREVER = ["--num_steps", "100000000", "--log_every", "100"]  # hours: only a fault ends it
LAUNCHERS = ["horovodrun-gloo", "horovodrun-mpi", "mpirun"]


def _ended_within(job, seconds: float) -> tuple[int | None, float]:
    start = time.monotonic()
    code = job.wait(seconds)
    return code, time.monotonic() - start


@pytest.mark.core
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_killed_rank_ends_the_job(launcher, start_job):
    job = start_job(launcher, 2, FOREVER)
    job.wait_for("Step: 100 ")
    job.ranks()[1].kill()
    code, took = _ended_within(job, 30)
    assert code is not None, f"still running 30 s after a rank was killed:\n{job.output}"
    assert code != 0
    assert not job.ranks(), "ranks outlived the job"


def test_stuck_rank_ends_the_job(start_job):
    """A SIGSTOPped rank never reaches the next allreduce: the others must give up."""
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "2", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "5"}
    job = start_job("mpirun", 2, FOREVER, env)
    job.wait_for("Step: 100 ")
    job.ranks()[1].send_signal(signal.SIGSTOP)
    code, took = _ended_within(job, 60)
    assert code is not None, f"a stuck rank hung the job:\n{job.output}"
    assert code != 0
    assert "no training progress for" in job.output


@pytest.mark.parametrize("launcher", ["horovodrun-mpi", "horovodrun-gloo"])
def test_ctrl_c_ends_every_rank(launcher, start_job):
    job = start_job(launcher, 2, FOREVER)
    job.wait_for("Step: 100 ")
    os.killpg(job.proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    code, took = _ended_within(job, 20)
    assert code is not None and code != 0, job.output
    assert not job.ranks(), "ranks outlived Ctrl-C"
