"""Across hosts: 2 hosts x 2 slots of the namespaced test cluster (ci/cluster.sh), every launcher.

Jobs are launched from inside node1, as a user logged in on the first node would. The hosts share
this machine's file system, so the venv, the data and the metrics JSON are at the same paths
everywhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from conftest import (
    CLUSTER,
    CLUSTER_NAME,
    CLUSTER_STATE,
    LAUNCH_TIMEOUT_S,
    NODES,
    REPO,
    Job,
    Run,
    job_tag,
    launch_command,
    launcher_env,
    params_of,
    unavailable,
)
from reference import averaged_sgd

pytestmark = [pytest.mark.multiprocess, pytest.mark.multihost]

HOSTS = "node1:2,node2:2"  # ranks 0, 1 on node1 and 2, 3 on node2, under every launcher
LAUNCHERS = ["horovodrun-mpi", "horovodrun-gloo", "mpirun-host", "mpirun-hostfile"]
# docs/launching.md's srun recipe, 2 nodes x 2 tasks: Open MPI's PMIx start, and the whole step
# ended when a rank fails (else the others wait for it in MPI_Init for ever).
SRUN = ["srun", "--mpi=pmix", "--kill-on-bad-exit=1", "--nodes=2", "--ntasks-per-node=2"]
# Open MPI's daemons talk over TCP connections that, by default, notice a lost host only after
# 8 minutes (keep-alive after 300 s idle, 9 probes 20 s apart): docs/launching.md's recipe for jobs
# across hosts shortens that, and these tests use the recipe.
MPI_KEEPALIVE = {
    "OMPI_MCA_oob_tcp_keepalive_time": "10",
    "OMPI_MCA_oob_tcp_keepalive_intvl": "5",
    "OMPI_MCA_oob_tcp_keepalive_probes": "3",
}


@pytest.fixture(scope="session")
def slurm_cluster(cluster):
    """SLURM on the hosts (ci/cluster.sh slurm): slurmctld on node1, a slurmd on each; it goes
    with the cluster."""
    started = subprocess.run(
        ["bash", str(CLUSTER), "slurm"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=launcher_env(),
        timeout=600,  # may apt-get install SLURM first
    )
    if started.returncode != 0:
        unavailable(f"ci/cluster.sh slurm failed: {(started.stderr or started.stdout).strip()}")


def host_of(pid: int) -> str | None:
    """The cluster host a process runs on: the one whose network namespace it shares."""
    try:
        net = os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None
    for node in NODES:
        sshd = (CLUSTER_STATE / f"{node}.pid").read_text().strip()
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{sshd}/ns/net") == net:
                return node
    return None


def job_command(
    launcher: str, tmp_path: Path, env: dict[str, str], launcher_args: tuple[str, ...] = ()
) -> list[str]:
    """The command a user on node1 types, for 2 hosts x 2 slots; env names what to forward."""
    if launcher.startswith("horovodrun"):
        # horovodrun forwards the whole environment to every rank itself.
        return launch_command(launcher, 4, ("-H", HOSTS, *launcher_args))
    if launcher == "srun":  # srun too; the cluster's SLURM (slurm_cluster) places the ranks
        return [*SRUN, "hvd-linreg"]
    if launcher == "mpirun-hostfile":
        hostfile = tmp_path / "hostfile"
        hostfile.write_text("".join(f"{node} slots=2\n" for node in NODES))
        where = ("--hostfile", str(hostfile))
    else:
        where = ("--host", HOSTS)
    # mpirun passes on only the variables named with -x (or already in the remote shell).
    forward = [arg for name in ["PATH", "PYTHONPATH", *env] for arg in ("-x", name)]
    return launch_command("mpirun", 4, (*where, *forward))


def cluster_env(
    launcher: str, extra: dict[str, str] | None = None, keepalives: bool = True
) -> dict[str, str]:
    """What each rank needs: this worktree's package first, the venv's tools on PATH."""
    env = {"PYTHONPATH": str(REPO), **(extra or {})}
    if "gloo" not in launcher and keepalives:
        env.update(MPI_KEEPALIVE)
    return env


class ClusterJob(Job):
    """A job launched on node1, 2 hosts x 2 slots, to be waited for or disturbed."""

    def __init__(self, launcher, args, tmp_path: Path, env=None, launcher_args=(), keepalives=True):
        self.tag = job_tag(tmp_path)  # in every rank's command line: finds them
        env = cluster_env(launcher, env, keepalives)
        command = job_command(launcher, tmp_path, env, launcher_args)
        cmd = [*command, *args, "--metrics_json", self.tag]
        self._start(["bash", str(CLUSTER), "exec", "node1", *cmd], tmp_path, launcher_env(env))

    def run(self, timeout: float = LAUNCH_TIMEOUT_S) -> Run:
        """Wait for the end: exit code, output (stdout and stderr as they came), metrics."""
        code = self.wait(timeout)
        assert code is not None, f"still running after {timeout} s:\n{self.output}"
        self.wait_for_the_output_to_end()
        path = Path(self.tag)
        return Run(code, self.output, "", json.loads(path.read_text()) if path.exists() else None)

    def rank_on(self, node: str) -> psutil.Process:
        on_node = [p for p in self.ranks().values() if host_of(p.pid) == node]
        assert on_node, f"no rank on {node}:\n{self.output}"
        return on_node[0]

    def leftovers(self) -> list[str]:
        """What of this job still runs on any host: its ranks, and Open MPI's daemons."""
        found = []
        for p in psutil.process_iter(["cmdline"]):
            cmd = p.info["cmdline"] or [""]
            host = host_of(p.pid)
            if host and (self.tag in cmd or os.path.basename(cmd[0]) in ("orted", "prted")):
                found.append(f"{host}: {' '.join(cmd)[:100]}")
        return found


@pytest.fixture
def start_cluster_job(cluster, tmp_path):
    """Start jobs on the cluster; whatever is left of them is killed afterwards."""
    jobs = []

    def start(launcher, args, env=None, launcher_args=(), keepalives=True) -> ClusterJob:
        where = tmp_path / f"job{len(jobs)}"
        where.mkdir()
        jobs.append(ClusterJob(launcher, args, where, env, launcher_args, keepalives))
        return jobs[-1]

    yield start
    for job in jobs:
        job.kill()


STEPS, LR, BATCH = 200, 0.05, 16


def assert_two_hosts_equal_averaged_sgd(run: Run, X: np.ndarray, y: np.ndarray) -> None:
    assert run.returncode == 0, run.output
    m = run.metrics
    assert m["size"] == 4
    assert m["hosts"] == ["node1", "node1", "node2", "node2"]  # both hosts took part
    expected = averaged_sgd(
        X, y, ranks=4, batch_size=BATCH, steps=STEPS, lr=LR, w0=m["initial_w"], b0=m["initial_b"]
    )
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-4)


def reference_job(regression_file) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Flags of a job on a data file, and the file's X and y for the reference."""
    path, X, y = regression_file()
    args = ["--data", str(path), "--num_steps", str(STEPS), "--learning_rate", str(LR)]
    return [*args, "--batch_size", str(BATCH)], X, y


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_two_hosts_equal_averaged_sgd(launcher, start_cluster_job, regression_file):
    args, X, y = reference_job(regression_file)
    assert_two_hosts_equal_averaged_sgd(start_cluster_job(launcher, args).run(), X, y)


KEEPALIVE_WARNING = "spans hosts under Open MPI without its TCP keep-alive settings"


# Open MPI 5 starts its ranks with prterun/prted, where the watchdog's fallback is untested.
OPEN_MPI_5 = shutil.which("prterun") is not None


@pytest.mark.parametrize(
    "launcher, keepalives, watchdog",
    [
        ("mpirun-host", False, False),
        ("horovodrun-mpi", False, False),
        ("mpirun-host", True, False),
        ("mpirun-host", False, True),
    ],
)
def test_without_keepalives_rank_0_warns_that_a_lost_host_would_keep_mpirun_waiting(
    launcher, keepalives, watchdog, start_cluster_job, regression_file
):
    """Open MPI's defaults leave mpirun waiting for a host cut off the network long after the
    ranks end (docs/launching.md): a job across hosts started without the keep-alive settings
    says so at its start, once, with the settings; one started with them does not, nor, under
    Open MPI 4, one whose watchdog is on (it ends mpirun itself: hvd_linreg/runtime/daemons.py)."""
    args, _, _ = reference_job(regression_file)
    env = None if watchdog else {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "0"}
    run = start_cluster_job(launcher, args, env, keepalives=keepalives).run()
    assert run.returncode == 0, run.output
    warnings = [line for line in run.output.splitlines() if KEEPALIVE_WARNING in line]
    warns = not keepalives and (not watchdog or OPEN_MPI_5)
    assert len(warnings) == (1 if warns else 0), run.output
    if warnings:
        assert "OMPI_MCA_oob_tcp_keepalive_time=10" in warnings[0]
        assert warnings[0].endswith("(docs/launching.md, Several machines)")


# A second interface on every host with one same address on each (as a docker0 bridge has):
# no network between the hosts, though it looks like one to Open MPI.
DECOY = ("docker0", "198.19.0.1/24")
NIC = "eth0"  # the interface the hosts reach each other on
# docs/launching.md's one interface setting, as each launcher takes it.
NIC_FOR_MPIRUN = {"OMPI_MCA_btl_tcp_if_include": NIC, "OMPI_MCA_oob_tcp_if_include": NIC}
NIC_FOR_HOROVODRUN = ("--network-interfaces", NIC)


@contextlib.contextmanager
def decoy_interfaces():
    """DECOY on every host, removed afterwards (cluster.sh down removes it with the host)."""
    name, address = DECOY
    try:
        for node in NODES:
            ns = f"{CLUSTER_NAME}-{node}"
            subprocess.run(["ip", "-n", ns, "link", "add", name, "type", "bridge"], check=True)
            subprocess.run(["ip", "-n", ns, "addr", "add", address, "dev", name], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", name, "up"], check=True)
        yield
    finally:
        for node in NODES:
            ns = f"{CLUSTER_NAME}-{node}"
            subprocess.run(["ip", "-n", ns, "link", "del", name], stderr=subprocess.DEVNULL)


@pytest.mark.parametrize(
    "launcher, env, launcher_args",
    [("mpirun-host", NIC_FOR_MPIRUN, ()), ("horovodrun-gloo", None, NIC_FOR_HOROVODRUN)],
    ids=["mpirun-host", "horovodrun-gloo"],
)
def test_interface_setting_trains_across_hosts_with_a_decoy_interface(
    launcher, env, launcher_args, start_cluster_job, regression_file
):
    args, X, y = reference_job(regression_file)
    with decoy_interfaces():
        run = start_cluster_job(launcher, args, env, launcher_args).run()
    assert_two_hosts_equal_averaged_sgd(run, X, y)


# What Open MPI's TCP layer says when a rank reached the decoy address (its own host's): one of
# these, from run to run.
DECOY_COMPLAINTS = (
    "Open MPI failed to TCP connect to a peer MPI process",
    "Open MPI accepted a TCP connection from what appears to be a",
    "mca_btl_tcp_endpoint_recv_connect_ack] received unexpected process identifier",
)


def test_without_the_interface_setting_mpirun_connects_to_the_decoy(start_cluster_job):
    """What the setting prevents: a rank connects to the decoy address and the job hangs."""
    with decoy_interfaces():
        job = start_cluster_job("mpirun-host", ["--num_steps", "50"])
        deadline = time.monotonic() + 90  # a hang bound: the complaint comes in seconds
        while not any(complaint in job.output for complaint in DECOY_COMPLAINTS):
            assert time.monotonic() < deadline, f"no complaint after 90 s:\n{job.output}"
            time.sleep(0.5)
    assert "Step:" not in job.output


def test_bad_data_only_node2_sees_stops_every_rank(start_cluster_job, tmp_path):
    """Row 3 belongs to rank 3 of 4, on node2: ranks on node1 read clean rows, yet all stop."""
    data = tmp_path / "d.csv"
    data.write_text("a,b\n" + "".join(f"{i},{i}\n" if i != 3 else "3,inf\n" for i in range(8)))
    run = start_cluster_job("mpirun-host", ["--data", str(data), "--batch_size", "1"]).run()
    assert run.returncode == 2, run.output
    errors = [line for line in run.output.splitlines() if "hvd-linreg: error:" in line]
    assert len(errors) == 1, run.output  # rank 0 speaks, once
    assert "d.csv line 5: NaN or inf in column 'b'" in errors[0]
    assert errors[0].endswith("(seen on rank 3)")
    assert "Traceback" not in run.output


FOREVER = ["--num_steps", "100000000", "--log_every", "100"]  # hours: only a fault ends it
# The tool's stall limit in these tests (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS). It must exceed the
# time Open MPI's keep-alives take to find a lost host (MPI_KEEPALIVE: at most 10 + 3 x 5 s): a
# rank that ended first would make mpirun send to the lost host, and a TCP connection with data in
# flight no longer sends keep-alives; it waits for the host for 15 minutes.
STALL_S = 40
STALL = {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": str(STALL_S)}


def ended_clean_within(job: ClusterJob, seconds: float) -> tuple[int | None, list[str]]:
    """The launcher's exit code and what of the job still runs on any host, `seconds` after
    now at the latest (None: the launcher still ran)."""
    start = time.monotonic()
    code = job.wait(seconds)
    while job.leftovers() and time.monotonic() - start < seconds:
        time.sleep(0.5)
    print(f"job ended {time.monotonic() - start:.1f} s after the fault (exit {code})")
    return code, job.leftovers()


@pytest.mark.parametrize("launcher", ["horovodrun-mpi", "horovodrun-gloo", "mpirun-host"])
def test_killed_rank_on_node2_ends_the_job(launcher, start_cluster_job):
    job = start_cluster_job(launcher, FOREVER)
    job.wait_for("Step: 100 ")
    job.rank_on("node2").kill()
    code, left = ended_clean_within(job, 30)
    assert code is not None, f"still running 30 s after a rank was killed:\n{job.output}"
    assert code != 0
    assert not left, f"left running: {left}"


@contextlib.contextmanager
def off_the_network(node: str):
    """The host's only interface down, as a pulled cable or a dead switch port would do."""
    ns = f"{CLUSTER_NAME}-{node}"
    subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "down"], check=True)
    try:
        yield
    finally:
        subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "up"], check=True)


@pytest.mark.parametrize(
    "launcher, keepalives",
    [
        ("horovodrun-mpi", True),
        ("horovodrun-gloo", True),
        ("mpirun-host", True),
        ("horovodrun-mpi", False),
        ("mpirun-host", False),
    ],
)
def test_node2_off_the_network_ends_the_job(launcher, keepalives, start_cluster_job):
    """Every rank, and the launcher, end within the stall limit + 30 s; nothing stays behind on
    either host, node2 included, while it is still cut off. Without Open MPI's keep-alives the
    watchdog's rank ends mpirun and the lost host's daemon itself
    (hvd_linreg/runtime/daemons.py)."""
    job = start_cluster_job(launcher, FOREVER, STALL, keepalives=keepalives)
    job.wait_for("Step: 100 ")
    with off_the_network("node2"):
        code, left = ended_clean_within(job, STALL_S + 30)
    assert code is not None, f"still running {STALL_S + 30} s after node2 was cut:\n{job.output}"
    assert code != 0
    assert not left, f"left running: {left}"


def set_hostname(node: str, name: str) -> None:
    subprocess.run(["bash", str(CLUSTER), "exec", node, "hostname", name], check=True)


@contextlib.contextmanager
def misnamed(node: str, name: str | None = None, hosts: str | None = None):
    """The host under another name and/or with another /etc/hosts, restored afterwards."""
    # Written in place: the host sees this very file (a bind mount), not a new one.
    hosts_file = Path(f"/etc/netns/{CLUSTER_NAME}-{node}/hosts")
    saved = hosts_file.read_text()
    try:
        if name:
            set_hostname(node, name)
        if hosts is not None:
            hosts_file.write_text(hosts)
        yield
    finally:
        set_hostname(node, node)
        hosts_file.write_text(saved)


LOCALHOST = "127.0.0.1 localhost\n"
# (node2's name, node2's /etc/hosts, what rank 2, node2's first rank, must say)
HOST_NAME_CASES = {
    "two hosts with one name": ("node1", None, "which is not an address of this host"),
    "name resolving to loopback": (
        None,
        f"{LOCALHOST}127.0.1.1 node2\n198.18.0.1 node1\n",  # Debian's default line
        "resolves to 127.0.1.1, a loopback address",
    ),
    "name that does not resolve": (
        None,
        f"{LOCALHOST}198.18.0.1 node1\n",
        "does not resolve to an address",
    ),
}


@pytest.mark.parametrize("launcher", ["horovodrun-gloo", "mpirun-host"])
@pytest.mark.parametrize("case", HOST_NAME_CASES)
def test_bad_host_name_is_refused_before_horovod_starts(case, launcher, start_cluster_job):
    name, hosts, message = HOST_NAME_CASES[case]
    with misnamed("node2", name, hosts):
        run = start_cluster_job(launcher, ["--num_steps", "50"]).run(timeout=90)
    errors = [line for line in run.output.splitlines() if "hvd-linreg: error:" in line]
    assert len(errors) == 1, run.output  # node2's first rank speaks for it, once
    assert message in errors[0]
    # Every rank on node2 exits 2; the launcher ends node1's, which wait in Horovod's start.
    if launcher.startswith("mpirun"):
        assert run.returncode == 2, run.output
    else:  # horovodrun --gloo exits 1 and names the ranks' exit code
        assert "Exit code: 2" in run.output
    assert "Step:" not in run.output
    assert "Segmentation fault" not in run.output
    assert "]<stderr>:Traceback" not in run.output  # no rank printed one (horovodrun may)


def test_one_name_on_two_hosts_that_each_resolve_it_is_refused(start_cluster_job):
    """Each host maps the shared name to its own address (containers do): nothing looks wrong
    on either host alone, so the ranks compare names once Horovod has started."""
    hosts = f"{LOCALHOST}198.18.0.2 node1\n"
    with misnamed("node2", "node1", hosts):
        run = start_cluster_job("horovodrun-gloo", ["--num_steps", "50"]).run(timeout=90)
    errors = [line for line in run.output.splitlines() if "hvd-linreg: error:" in line]
    assert len(errors) == 1, run.output  # rank 0 speaks, once
    assert "two hosts of this job are both called 'node1'" in errors[0]
    assert "Exit code: 2" in run.output


def run_doctor_on_node1(*args: str) -> subprocess.CompletedProcess:
    doctor = [sys.executable, "-m", "hvd_linreg", "doctor", "--hosts", HOSTS, *args]
    return subprocess.run(
        ["bash", str(CLUSTER), "exec", "node1", *doctor],
        capture_output=True,
        text=True,
        timeout=LAUNCH_TIMEOUT_S * 3,
        stdin=subprocess.DEVNULL,
        env=launcher_env({"PYTHONPATH": str(REPO)}),
    )


def test_doctor_passes_across_the_hosts(cluster):
    proc = run_doctor_on_node1()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for host in NODES:
        assert f"ok    {host}: {host}, same Python and packages at {sys.executable}" in proc.stdout
    assert proc.stdout.count("starts 4 ranks") == 3, proc.stdout  # horovodrun MPI, Gloo; mpirun


def test_doctor_finds_two_hosts_with_one_name(cluster):
    with misnamed("node2", "node1"):
        proc = run_doctor_on_node1("--timeout", "60")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL  node2 and node1 are both called 'node1'" in proc.stdout
    assert "fix: give each host its own name (hostnamectl set-hostname NAME)" in proc.stdout


@contextlib.contextmanager
def without_venv(node: str):
    """The venv gone from one host only: an empty tmpfs over its path in that host's mount
    namespace (its sshd's, which every ssh session to it shares), unmounted afterwards."""
    venv = sys.prefix
    mount = ["mount", "-t", "tmpfs", "none", venv]
    subprocess.run(["bash", str(CLUSTER), "exec", node, *mount], check=True)
    try:
        assert Path(sys.executable).exists(), "the mount reached this machine's namespace"
        yield
    finally:
        subprocess.run(["bash", str(CLUSTER), "exec", node, "umount", venv])


def test_doctor_finds_a_host_without_the_venv(cluster):
    with without_venv("node2"):
        proc = run_doctor_on_node1()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"ok    node1: node1, same Python and packages at {sys.executable}" in proc.stdout
    assert f"FAIL  node2: cannot run {sys.executable}" in proc.stdout
    assert "fix: every node needs the same venv at the same path" in proc.stdout
    assert "skip  launches across the hosts" in proc.stdout


def test_doctor_finds_an_address_that_every_host_has(cluster):
    with decoy_interfaces():
        proc = run_doctor_on_node1()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    name, address = DECOY
    assert f"FAIL  the same address {address.split('/')[0]} ({name}, " in proc.stdout
    setting = " ".join(f"{k}={v}" for k, v in NIC_FOR_MPIRUN.items())
    assert f"fix: name the interface the hosts share: export {setting} (mpirun), " in proc.stdout
    assert f"horovodrun {' '.join(NIC_FOR_HOROVODRUN)}" in proc.stdout
    assert "skip  launches across the hosts" in proc.stdout


def test_srun_across_two_nodes_equals_averaged_sgd(
    slurm_cluster, start_cluster_job, regression_file
):
    args, X, y = reference_job(regression_file)
    assert_two_hosts_equal_averaged_sgd(start_cluster_job("srun", args).run(), X, y)


def test_srun_step_on_two_hosts_with_one_name_is_refused(slurm_cluster, start_cluster_job):
    """srun gives a rank no ranks-per-host count, only its step's nodes: enough to refuse, before
    Horovod starts, what would otherwise crash the job (a rank's SIGSEGV in Open MPI)."""
    name, hosts, message = HOST_NAME_CASES["two hosts with one name"]
    with misnamed("node2", name, hosts):
        run = start_cluster_job("srun", ["--num_steps", "50"]).run(timeout=90)
    errors = [line for line in run.output.splitlines() if "hvd-linreg: error:" in line]
    assert len(errors) == 1, run.output  # node2's first rank speaks for it, once
    assert message in errors[0]
    assert "node2: task 2: Exited with exit code 2" in run.output
    assert run.returncode != 0
    assert "Step:" not in run.output


def test_slurm_job_script_across_two_nodes(slurm_cluster, regression_file, tmp_path):
    """hostfiles/slurm_job.sh submitted on node1 for 2 nodes x 2 tasks: its hostfile, then
    horovodrun across both."""
    args, X, y = reference_job(regression_file)
    out, metrics = tmp_path / "out.txt", tmp_path / "m.json"
    sbatch = ["sbatch", "--wait", "--nodes=2", "--ntasks-per-node=2", "--chdir", str(REPO)]
    sbatch += [
        "--output",
        str(out),
        "hostfiles/slurm_job.sh",
        *args,
        "--metrics_json",
        str(metrics),
    ]
    proc = subprocess.run(
        ["bash", str(CLUSTER), "exec", "node1", *sbatch],
        capture_output=True,
        text=True,
        timeout=LAUNCH_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        env=launcher_env(),
    )
    log = out.read_text() if out.exists() else ""
    metrics = json.loads(metrics.read_text()) if metrics.exists() else None
    run = Run(proc.returncode, proc.stdout + proc.stderr + log, "", metrics)
    assert_two_hosts_equal_averaged_sgd(run, X, y)
