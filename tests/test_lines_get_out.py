"""Every failure's line reaches the terminal, every time, under every launcher, at 4 ranks.

A launcher ends the job as soon as its first rank exits non-zero; a line the speaking rank had
not yet written is then lost. Races are rare, so each case runs several times, 20 launches per
launcher in all, and one missing line fails the test:
- a usage error that every rank finds before Horovod starts (10 runs, 14 where the next case
  does not apply);
- a host name that does not resolve, found by the ranks of the one host (4 runs, Gloo only: on
  one host the MPI launchers never look the name up; test_multihost.py covers mpirun -H);
- a data error that only rank 3 finds, in its own rows (2 runs);
- the watchdog, after rank 2 is stopped (SIGSTOP) (2 runs);
- a lost rank, rank 2 killed (SIGKILL) (2 runs).
The errors found before Horovod starts, where the race was seen, get the most runs; the others
take a TensorFlow start each (10-30 s at 4 ranks on 2 cores).
srun's launches run where a SLURM answers (CI's "this machine" stage).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time

import pytest
from test_slurm import slurm_answers

from conftest import launch, unavailable

pytestmark = [pytest.mark.multiprocess, pytest.mark.repeat]

RANKS = 4
LAUNCHERS = ["horovodrun-mpi", "horovodrun-gloo", "mpirun", "srun"]
RUNS = {"usage": 10, "data": 2, "host name": 4, "watchdog": 2, "lost rank": 2}
FOREVER = ["--num_steps", "100000000", "--log_every", "100"]  # only the fault ends it
STALL_S = 5  # the watchdog's limit in these runs
ENDS_WITHIN_S = 60  # a safety net: the launchers tear a job down in seconds
ERROR = "hvd-linreg: error:"
# Runs its arguments under a host name that resolves nowhere (in a UTS namespace of its own).
RENAMED = (
    "import os, socket, sys; socket.sethostname('hvdl-nowhere.invalid'); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


def runs(launcher: str, case: str) -> int:
    if case == "host name" and launcher != "horovodrun-gloo":
        return 0
    if case == "usage" and launcher != "horovodrun-gloo":
        return RUNS["usage"] + RUNS["host name"]  # 20 launches per launcher all the same
    return RUNS[case]


CASES = [(launcher, case) for launcher in LAUNCHERS for case in RUNS if runs(launcher, case)]


def marks_of(launcher: str, case: str) -> list:
    marks = [pytest.mark.slurm] if launcher == "srun" else []
    if case == "host name":  # `unshare --uts` renames the host only for root
        marks.append(pytest.mark.skipif(os.geteuid() != 0, reason="renames the host: needs root"))
    return marks


PARAMS = [pytest.param(*lc, marks=marks_of(*lc)) for lc in CASES]


def names_exit_code_2(launcher: str, code: int, output: str) -> bool:
    """Whether the launcher told the user that the ranks exited with 2."""
    if launcher == "horovodrun-gloo":  # horovodrun --gloo itself exits 1, naming the code
        return code == 1 and "Exit code: 2" in output
    if launcher == "srun" and code == 128 + signal.SIGTERM:
        # srun exits with its tasks' highest code: where --kill-on-bad-exit terminates a rank
        # that was still starting when the first one exited 2 (seen under load), that is
        # SIGTERM's, and srun names the code 2 on its lines.
        return re.search(r"srun: error: .*: Exited with exit code 2$", output, re.M) is not None
    return code == 2


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if ERROR in line]


def lost_rank_lines(launcher: str, output: str) -> list[str]:
    """The lines that say rank 2 was lost: the tool's, or the launcher's where the launcher ends
    the other ranks before they can notice (the MPI launchers, srun)."""
    says = {
        "horovodrun-gloo": r"hvd-linreg: error: the job lost a rank",
        "horovodrun-mpi": r"(?:mpirun|prterun) noticed that process rank 2 ",
        "mpirun": r"(?:mpirun|prterun) noticed that process rank 2 ",
        "srun": r"srun: error: .*task 2: Killed",
    }[launcher]
    return [line for line in output.splitlines() if re.search(says, line)]


# Open MPI's own start failing (seen once under a load of 10 on 2 cores: a rank's PMIx client
# found mpirun's server unreachable): the tool never ran, so it had no line to give; such a run
# is started once more, and the session's summary says so
MPI_DID_NOT_START = ("OPAL ERROR: Unreachable", "An error occurred in MPI_Init")


class DidNotStart(Exception):
    pass


# The faults' runs take the watchdog's short limit, which also bounds Horovod's start: under
# load (CI's clean roots compute beside this suite) one rank may still be importing TensorFlow
# when the others' limit is up. That start is not the fault under test: it is started once more.
HOROVOD_DID_NOT_START = "Horovod did not start within"
# A run's starts before it fails: in CI, horovodrun --gloo's lost-rank runs came after a run
# whose rank was SIGKILLed, and twice in a row their start outlasted the 5 s under the other
# lane's load (each start is named in the session's summary)
START_ATTEMPTS = 4


def one_launch(launcher, args, tmp_path, wrap=()) -> tuple[int, str]:
    run = launch(
        launcher, RANKS, args, tmp_path, wrap=wrap, metrics=False, timeout=ENDS_WITHIN_S * 3
    )
    failed = [s for s in MPI_DID_NOT_START if s in run.output]
    if failed:
        raise DidNotStart(f"Open MPI did not start ({failed[0]})")
    return run.returncode, run.output


def data_with_a_bad_row_on_rank_3(tmp_path) -> str:
    """8 rows, 2 per rank: rank 3's last row holds inf."""
    path = tmp_path / "d.csv"
    path.write_text("a,b\n1,2\n3,4\n5,6\n7,8\n1,2\n3,4\n5,6\n7,inf\n")
    return str(path)


def check_run(launcher: str, case: str, tmp_path, start_job) -> str | None:
    """One launch of the case: None when every line the user needs was there, else what was
    missing with the output."""
    if case in ("watchdog", "lost rank"):
        return check_fault(launcher, case, start_job)
    if case == "usage":
        code, out = one_launch(launcher, ["--num_steps", "2.5"], tmp_path)
        says = "argument --num_steps/--num-steps: invalid int value: '2.5'"
    elif case == "data":
        args = ["--data", data_with_a_bad_row_on_rank_3(tmp_path), "--batch_size", "1"]
        code, out = one_launch(launcher, args, tmp_path)
        says = "d.csv line 9: NaN or inf in"
    else:  # the host name, in a UTS namespace of the launcher's own
        wrap = ("unshare", "--uts", sys.executable, "-c", RENAMED)
        code, out = one_launch(launcher, ["--num_steps", "10"], tmp_path, wrap)
        says = "does not resolve to an address"
    errors = error_lines(out)
    if case == "data" and errors and not errors[0].endswith("(seen on rank 3)"):
        return f"the line does not name rank 3: {errors[0]}"
    if len(errors) != 1 or says not in errors[0]:
        return f"expected one line with {says!r}, got {errors}\n{out}"
    if not names_exit_code_2(launcher, code, out):
        return f"the launcher did not name exit code 2 (it exited {code})\n{out}"
    # horovodrun --gloo prints a traceback of its own for any failed worker; no rank may.
    rank_traceback = "]<stderr>:Traceback" if launcher == "horovodrun-gloo" else "Traceback"
    if rank_traceback in out:
        return f"a traceback\n{out}"
    return None


def check_fault(launcher: str, case: str, start_job) -> str | None:
    env = {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": str(STALL_S)}
    job = start_job(launcher, RANKS, FOREVER, env)
    try:
        job.wait_for("Step: 100 ")
    except AssertionError:
        if job.wait(ENDS_WITHIN_S) is not None:
            job.wait_for_the_output_to_end()
            if HOROVOD_DID_NOT_START in job.output:
                raise DidNotStart(f"Horovod did not start within {STALL_S} s") from None
        raise
    rank_2 = job.ranks()[2]
    if case == "watchdog":
        rank_2.send_signal(signal.SIGSTOP)
    else:
        rank_2.kill()
    start = time.monotonic()
    code = job.wait(ENDS_WITHIN_S)
    if code is None:
        return f"still running {ENDS_WITHIN_S} s after the fault\n{job.output}"
    print(f"{launcher} {case}: ended {time.monotonic() - start:.1f} s after the fault")
    if code == 0:
        return f"exit 0 after a fault\n{job.output}"
    if case == "watchdog":
        lines = [line for line in error_lines(job.output) if "no training progress" in line]
    else:
        lines = lost_rank_lines(launcher, job.output)
    return None if lines else f"no line says why the job ended\n{job.output}"


@pytest.fixture
def srun_or_skip(request):
    if request.node.callspec.params["launcher"] == "srun":
        reason = slurm_answers()
        if reason:
            unavailable(reason)


@pytest.mark.parametrize("launcher, case", PARAMS)
def test_the_line_always_gets_out(launcher, case, srun_or_skip, tmp_path, start_job, rescue_run):
    n = runs(launcher, case)
    misses = []
    for i in range(n):
        where = tmp_path / f"run{i}"
        where.mkdir()
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                miss = check_run(launcher, case, where, start_job)
                break
            except DidNotStart as e:
                if attempt == START_ATTEMPTS:
                    raise
                rescue_run(f"run {i + 1}, start {attempt}: {e}")
                (where := where / "again").mkdir()
        if miss:
            misses.append(f"run {i + 1}: {miss}")
    print(f"{launcher}, {case}: the line seen in {n - len(misses)} of {n} runs")
    assert not misses, f"{len(misses)} of {n} runs lost a line:\n" + "\n\n".join(misses)
