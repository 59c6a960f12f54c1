"""Launch the real tool: in-process, or as N ranks under horovodrun (MPI or Gloo) or mpirun."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent
# Safety net only: every launch here should end in seconds; a hang fails instead of blocking CI.
# Generous, because it is only ever waited out by a failing test: a 4-rank launch that takes
# 20 s alone took more than 180 s in the Debian 13 root while this machine also compiled
# Horovod and ran a second job (2 cores, 10 TensorFlow processes).
LAUNCH_TIMEOUT_S = 300
# The launchers and hvd-linreg live next to this Python (the venv's bin/): found there even
# when the tests run as `.venv/bin/python -m pytest` without `make test`'s PATH.
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
# A run started in the background (`make test &`, or `cmd &` in a script) inherits SIGINT
# ignored, and so would every job it starts, which would then shrug off the Ctrl-C that the
# fault tests send. A handler here makes the jobs start with the default disposition again.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    metrics: dict | None
    codes: dict[int, int] = field(default_factory=dict)  # launch_each_rank_reporting only

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def launcher_env(extra: dict | None = None) -> dict:
    """This environment without what an in-process run's MPI/Horovod start left in it
    (a singleton MPI_Init exports OMPI_*/PMIX_* variables that would confuse a new mpirun)."""
    prefixes = ("OMPI_", "PMIX_", "OPAL_", "HOROVOD_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    return {**env, **(extra or {})}


def launch_command(
    launcher: str, np_: int, extra: tuple[str, ...] = (), program: tuple[str, ...] = ("hvd-linreg",)
) -> list[str]:
    """The command line a user would type for each launcher (root on a 2-core machine)."""
    if launcher == "python":
        return [sys.executable, "-m", "hvd_linreg"]
    if launcher in ("horovodrun-mpi", "horovodrun-gloo"):
        controller = "--mpi" if launcher.endswith("mpi") else "--gloo"
        return [shutil.which("horovodrun"), "-np", str(np_), controller, *extra, *program]
    if launcher == "mpirun":
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        return [
            shutil.which("mpirun"),
            *root,
            "--oversubscribe",
            "--bind-to",
            "none",
            "-np",
            str(np_),
            *extra,
            *program,
        ]
    if launcher == "srun":  # docs/launching.md's recipe, in a SLURM allocation of this machine
        return ["srun", "--mpi=pmix", "--kill-on-bad-exit=1", "-n", str(np_), *extra, *program]
    raise ValueError(launcher)


def launch(
    launcher: str,
    np_: int,
    args: list[str],
    tmp_path: Path,
    *,
    launcher_args: tuple[str, ...] = (),
    timeout: float = LAUNCH_TIMEOUT_S,
    metrics: bool = True,
    program: tuple[str, ...] = ("hvd-linreg",),
    wrap: tuple[str, ...] = (),
    env: dict | None = None,
) -> Run:
    """Run to the end; with metrics=True the tool also writes its metrics JSON, read back. wrap
    is a command the launcher runs under (e.g. `unshare --uts ...`); env, variables set for it."""
    metrics_path = tmp_path / f"metrics-{launcher}-{np_}-{len(list(tmp_path.iterdir()))}.json"
    cmd = [*wrap, *launch_command(launcher, np_, launcher_args, program), *args]
    if metrics:
        cmd += ["--metrics_json", str(metrics_path)]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        env=launcher_env(env),
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)  # Open MPI gives ranks their own process groups: kill them all
        proc.communicate()
        raise
    metrics = read_metrics(metrics_path) if metrics_path.exists() else None
    codes = {
        int(r): int(c) for r, c in re.findall(r"^(?:\S*: ?)?rank (\d+) exited (\d+)$", stdout, re.M)
    }
    return Run(proc.returncode, stdout, stderr, metrics, codes)


# Each rank runs the tool under a shell that then says how it exited: what the launcher's own
# exit code (the first failure it saw) does not tell.
_REPORTING = '{tool} "$@"; echo "rank ${{HOROVOD_RANK:-$OMPI_COMM_WORLD_RANK}} exited $?"'


def launch_each_rank_reporting(
    launcher: str, np_: int, args: list[str], tmp_path: Path, tool: str = "hvd-linreg"
) -> Run:
    """launch(), with every rank's exit code in Run.codes (rank -> code)."""
    program = ("sh", "-c", _REPORTING.format(tool=tool), "sh")
    return launch(launcher, np_, args, tmp_path, metrics=False, program=program)


def _not_json(constant: str):
    raise ValueError(f"{constant} in the metrics JSON: not a JSON number")


def read_metrics(path: Path) -> dict:
    """The tool's metrics JSON, refusing NaN and Infinity: Python writes them, JSON has none."""
    return json.loads(Path(path).read_text(), parse_constant=_not_json)


def unavailable(reason: str) -> None:
    """A test that needs something this machine lacks (SLURM, several hosts, a clean root):
    outside CI skip with the reason; in CI (CI set), which is meant to provide it, fail with it,
    so that a promise never goes silently untested."""
    if os.environ.get("CI"):
        pytest.fail(f"CI is meant to run this, but: {reason}", pytrace=False)
    pytest.skip(reason)


def kill_tree(pid: int) -> None:
    with contextlib.suppress(psutil.NoSuchProcess):
        parent = psutil.Process(pid)
        for child in parent.children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        parent.kill()


def run_metrics(tmp_path: Path, size: int, args: list[str]) -> dict:
    """The metrics of hvd-linreg ARGS: in this process on one rank, under mpirun on more."""
    if size > 1:
        run = launch("mpirun", size, args, tmp_path)
        assert run.returncode == 0, run.output
        return run.metrics
    from hvd_linreg.cli import main

    out = tmp_path / "m.json"
    assert main([*args, "--metrics_json", str(out)]) == 0
    return read_metrics(out)


def run_command(tmp_path: Path, size: int, command: list[str]) -> None:
    """hvd-linreg COMMAND (predict, evaluate, ...) to its end with exit 0: in this process on
    one rank, under mpirun on more."""
    if size > 1:
        run = launch("mpirun", size, command, tmp_path, metrics=False)
        assert run.returncode == 0, run.output
        return
    from hvd_linreg.cli import main

    assert main(command) == 0


def estimator_checks_ran(estimator) -> set[str]:
    """scikit-learn's check_estimator on estimator: fails the test on a failed check, or a
    skipped one but array API input (which the estimators do not take; scikit-learn 1.9 checks
    it only with SCIPY_ARRAY_API=1 set before SciPy is imported); the checks that ran."""
    from sklearn.utils.estimator_checks import check_estimator

    results = check_estimator(estimator, on_fail=None)
    failed = [f"{r['check_name']}: {r['exception']}" for r in results if r["status"] == "failed"]
    assert not failed, "\n".join(failed)
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert skipped <= {"check_array_api_input"}, skipped
    return {r["check_name"] for r in results if r["status"] == "passed"}


def params_of(metrics: dict) -> np.ndarray:
    return np.append(metrics["w"], metrics["b"])


def assert_sgd_is_simulated(tmp_path, size: int, model_args: list[str], X, y, grad) -> dict:
    """30 steps of plain SGD (lr 0.02, a global batch of 16 rows, float64, --seed 0) at size
    ranks equal the NumPy simulation of averaged SGD on grad, the loss's gradient, to 1e-9.
    Returns the run's metrics."""
    from reference import SGD, averaged, constant

    np.savez(tmp_path / "d.npz", X=X, y=y)
    batch, steps = 16 // size, 30
    args = ["--data", str(tmp_path / "d.npz"), *model_args, "--num_steps", str(steps)]
    args += ["--batch_size", str(batch), "--learning_rate", "0.02", "--dtype", "float64"]
    m = run_metrics(tmp_path, size, [*args, "--seed", "0", "--log_every", "10"])
    expected = averaged(
        X,
        y,
        ranks=size,
        batch_size=batch,
        steps=steps,
        optimizer=SGD(constant(0.02)),
        w0=m["initial_w"],
        b0=m["initial_b"],
        grad=grad,
    )
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-9, atol=1e-12)
    return m


@pytest.fixture
def regression_file(tmp_path: Path):
    """Write a small regression problem to a .npz file; return (path, X, y) as stored."""

    def make(num_rows: int = 1000, num_features: int = 3, seed: int = 7):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((num_rows, num_features)).astype(np.float32)
        w = np.arange(1, num_features + 1, dtype=np.float32)
        y = (X @ w - 1.5 + 0.1 * rng.standard_normal(num_rows)).astype(np.float32)
        path = tmp_path / "data.npz"
        np.savez(path, X=X, y=y)
        return path, X, y

    return make


def job_tag(tmp_path: Path, name: str = "metrics.json") -> str:
    """A path for a job's command line (its --metrics_json) that no other process on the
    machine holds, so that the job's ranks are found by it. tmp_path alone is not unique: the
    clean roots run beside each other and share the machine's process table, and each root's
    first pytest run names its folders the same (/tmp/pytest-of-root/pytest-0/...)."""
    return str(tmp_path / f"{uuid.uuid4().hex[:12]}-{name}")


class Job:
    """A launch left running, to be disturbed: its output is read as it comes."""

    def __init__(self, launcher: str, np_: int, args: list[str], tmp_path: Path, env=None):
        self.tag = job_tag(tmp_path)  # in every rank's command line: finds them
        cmd = [*launch_command(launcher, np_), *args, "--metrics_json", self.tag]
        self._start(cmd, tmp_path, launcher_env(env))

    def _start(self, cmd: list[str], cwd: Path, env: dict) -> None:
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # its own process group, like a job started from a shell
        )
        self.seen: dict[int, psutil.Process] = {}  # every rank ranks() has found, for kill()
        self.lines: list[str] = []
        self.arrived: list[float] = []  # time.monotonic() at which each line was read
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            self.arrived.append(time.monotonic())

    def wait_for_the_output_to_end(self, timeout: float = 10) -> None:
        """After the launcher exits: until every process that held its output has closed it."""
        self._reader.join(timeout)
        assert not self._reader.is_alive(), (
            f"the job's output still open {timeout} s after the launcher exited:\n{self.output}"
        )

    def slowest_stretch(self, marker: str = "Step: ") -> float:
        """The longest time between two log lines so far: how long one stretch of training
        took, as the watchdog's 10 x rule measures it (seen from here, a bit later)."""
        times = [t for t, line in zip(self.arrived, self.lines) if marker in line]
        return max((b - a for a, b in zip(times, times[1:])), default=0.0)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, text: str, timeout: float = LAUNCH_TIMEOUT_S, after: int = 0) -> None:
        """Wait until a line (from line number `after` on) contains text."""
        deadline = time.monotonic() + timeout
        while text not in "".join(self.lines[after:]):
            assert self.proc.poll() is None, f"ended before {text!r}:\n{self.output}"
            assert time.monotonic() < deadline, f"no {text!r} after {timeout} s:\n{self.output}"
            time.sleep(0.1)

    def ranks(self) -> dict[int, psutil.Process]:
        """The job's rank processes by rank (as the launcher numbered them)."""
        found = {}
        for p in psutil.process_iter(["cmdline", "environ"]):
            cmd = p.info["cmdline"] or []
            if len(cmd) > 1 and cmd[1].endswith("hvd-linreg") and self.tag in cmd:
                env = p.info["environ"] or {}
                rank = env.get(
                    "HOROVOD_RANK", env.get("OMPI_COMM_WORLD_RANK", env.get("SLURM_PROCID"))
                )
                found[int(rank)] = p
        self.seen.update(found)
        return found

    def wait(self, timeout: float) -> int | None:
        """The launcher's exit code, or None if it is still running after timeout."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL the ranks (Open MPI gives each its own process group), then the launcher's
        group. The ranks already seen die at once, before the slower search for any others: a
        fast job would run on for that search."""
        for p in [*self.seen.values(), *self.ranks().values()]:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


# Runs a test started once more because of a known upstream failure (rescue_run). They are
# listed at the end of the session, -q included: a retry must not hide how often it happened.
_RESCUED = pytest.StashKey[list]()


@pytest.fixture
def rescue_run(request):
    """Call with why a test starts its job once more: named in the session's summary."""

    def rescue(why: str) -> None:
        request.config.stash.setdefault(_RESCUED, []).append(f"{request.node.nodeid}: {why}")

    return rescue


# The only reasons a test may skip in a CI stage (HVD_LINREG_STRICT_SKIPS=1, which ci/test.sh
# sets there and ci/cleanroot.sh passes into the roots, whose cleared environment has no CI):
# anything else that skips, a dependency gone missing above all, fails the stage. Stages
# deselect by marker what they do not run (SLURM, the hosts) rather than skip it.
EXPECTED_SKIPS = {
    "no Python 3.10 on this machine": "tests/test_setup.py: Debian 12 and 13 have no Python 3.10",
    # tests marked glmnet: R is a Debian package a machine may lack (apt install r-base-core
    # r-cran-glmnet); CI installs it (ci/test.sh); the other references run everywhere
    "R's glmnet is not installed": "tests/test_elastic_net.py: R is not a Python package",
}
_skips: dict[str, list[str]] = {}  # reason -> test ids, as reported (by xdist's workers too)


def _record_skip(report) -> None:
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = report.longrepr[2].removeprefix("Skipped: ")
        _skips.setdefault(reason, []).append(report.nodeid)


def pytest_runtest_logreport(report) -> None:
    _record_skip(report)


def pytest_collectreport(report) -> None:
    # A module-level pytest.skip skips at collection: no test's report says so.
    _record_skip(report)


def strict_skips() -> bool:
    return os.environ.get("HVD_LINREG_STRICT_SKIPS") == "1"


def unexpected_skips() -> dict[str, list[str]]:
    return {r: ids for r, ids in _skips.items() if r not in EXPECTED_SKIPS}


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus) -> None:
    if strict_skips() and unexpected_skips():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config) -> None:
    rescued = config.stash.get(_RESCUED, [])
    if rescued:
        terminalreporter.section(f"{len(rescued)} run(s) rescued by starting the job once more")
        for line in rescued:
            terminalreporter.write_line(line)
    if _skips:
        terminalreporter.section("skips by reason")
        for reason, ids in sorted(_skips.items(), key=lambda kv: -len(kv[1])):
            terminalreporter.write_line(f"{len(ids):4d}  {reason}")
    if strict_skips() and unexpected_skips():
        terminalreporter.section("skips not declared in tests/conftest.py EXPECTED_SKIPS: FAILED")
        for reason, ids in unexpected_skips().items():
            terminalreporter.write_line(f"UNDECLARED SKIP {reason}: {', '.join(ids)}")


@pytest.fixture
def fault_seed() -> int:
    """The seed of a test's random fault points: printed, and HVD_LINREG_TEST_SEED=N repeats it."""
    seed = int(os.environ.get("HVD_LINREG_TEST_SEED") or random.randrange(2**32))
    print(f"fault points: HVD_LINREG_TEST_SEED={seed}")
    return seed


@pytest.fixture
def start_job(tmp_path):
    """Start jobs that the test disturbs; whatever is left of them is killed afterwards."""
    jobs = []

    def start(launcher: str, np_: int, args: list[str], env=None) -> Job:
        where = tmp_path / f"job{len(jobs)}"
        where.mkdir()
        job = Job(launcher, np_, args, where, env)
        jobs.append(job)
        return job

    yield start
    for job in jobs:
        job.kill()


# The namespaced test cluster (ci/cluster.sh) of the multihost tests: one per session, shared by
# every test file that uses it.
CLUSTER = REPO / "ci" / "cluster.sh"
CLUSTER_NAME = os.environ.get("HVD_LINREG_CLUSTER", "hvdl")  # as ci/cluster.sh names it
CLUSTER_STATE = Path(f"/run/hvd-linreg-cluster-{CLUSTER_NAME}")
NODES = ("node1", "node2")


def cluster_wanted_or_skip() -> None:
    """The cluster runs in CI, and elsewhere when asked (HVD_LINREG_MULTIHOST=1: it installs
    sshd and builds namespaces on this machine); else its tests skip, saying so."""
    if not (os.environ.get("CI") or os.environ.get("HVD_LINREG_MULTIHOST") == "1"):
        pytest.skip(
            "builds a cluster of namespaced hosts on this machine: runs in CI, or with "
            "HVD_LINREG_MULTIHOST=1"
        )


def cluster_up() -> None:
    """Bring the cluster up. In CI a cluster that cannot come up fails the test with the
    reason (conftest.unavailable); elsewhere it skips with the reason."""
    if os.geteuid() != 0:
        reason = "the test cluster needs root (network namespaces, sshd)"
    else:
        up = subprocess.run(
            ["bash", str(CLUSTER), "up", str(len(NODES))],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=600,  # may apt-get install iproute2 and openssh-server first
        )
        if up.returncode == 0:
            return
        reason = f"ci/cluster.sh up {len(NODES)} failed: {(up.stderr or up.stdout).strip()}"
    unavailable(reason)


def cluster_down() -> None:
    subprocess.run(["bash", str(CLUSTER), "down"], stdin=subprocess.DEVNULL, timeout=120)


@pytest.fixture(scope="session")
def cluster():
    """The hosts, up for the whole session and down on every way out: the finalizer, and a
    SIGTERM or SIGHUP (a CI job cancelled) that would otherwise skip it. A session that skips
    the cluster takes nothing down: the hosts are the machine's, and another session (a CI run
    beside this one) may be using them."""
    cluster_wanted_or_skip()

    def down_and_exit(signum, _frame):
        cluster_down()
        sys.exit(128 + signum)

    previous = {s: signal.signal(s, down_and_exit) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        cluster_up()
        yield
    finally:
        cluster_down()
        for s, handler in previous.items():
            signal.signal(s, handler)


ERROR = "hvd-linreg: error: "  # the prefix of the one line of a usage error


def refused(capsys, argv: list[str]) -> str:
    """What `hvd-linreg ARGV` says when it refuses: exit code 2 and one error line, which is
    returned without its prefix."""
    from hvd_linreg.cli import main

    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "Traceback" not in out + err
    errors = [line for line in err.splitlines() if line.startswith(ERROR)]
    assert len(errors) == 1, err
    return errors[0][len(ERROR) :]
