"""How the benchmark starts processes: the tool and the MPI programs under mpirun (or horovodrun
for Gloo), MultiWorkerMirroredStrategy workers as plain local processes. Every launch has a
time limit."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
LAUNCH_TIMEOUT_S = 240  # a safety net: the slowest launch (4 ranks, 8 M rows) takes about 90 s
# What horovodrun passes to mpirun on one host: the ob1 messaging layer (shared memory between
# local ranks), no InfiniBand probing.
MCA = ["--mca", "pml", "ob1", "--mca", "btl", "^openib"]
# The namespaced test cluster of the multihost tests: hosts node1..N on this machine.
CLUSTER = REPO / "ci" / "cluster.sh"


class LaunchError(RuntimeError):
    """A launch failed or timed out; the message ends with the tail of its output."""


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout_s=LAUNCH_TIMEOUT_S) -> str:
    """Run cmd to its end (or LaunchError); return what it printed on stdout."""
    try:
        proc = subprocess.run(
            cmd,
            env={**os.environ, **(env or {})},
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise LaunchError(f"timed out after {timeout_s} s: {' '.join(cmd)}") from None
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-1500:]
        raise LaunchError(f"exit code {proc.returncode}: {' '.join(cmd)}\n{tail}")
    return proc.stdout


def output(cmd: list[str], env: dict[str, str] | None = None) -> str:
    """Run cmd to its end (or LaunchError); what it printed on stdout."""
    return _run(cmd, env)


def wall_s(cmd: list[str], env: dict[str, str] | None = None) -> float:
    """Seconds from starting cmd to its exit: what a user waits for."""
    start = time.perf_counter()
    _run(cmd, env)
    return time.perf_counter() - start


def horovodrun(np_: int) -> list[str]:
    """`horovodrun -np N`, as a user starts a job (its own start-up included)."""
    return [shutil.which("horovodrun") or "horovodrun", "-np", str(np_)]


def json_output(cmd: list[str]) -> dict:
    """Run cmd; its last line of output is JSON."""
    return json.loads(_run(cmd).strip().splitlines()[-1])


def launcher(
    np_: int, controller: str = "mpi", cpus: str | None = None, hosts: str | None = None
) -> list[str]:
    """The command that starts np_ ranks: plain `mpirun` for the MPI controller (horovodrun's
    own start-up costs about 10 s a launch here and changes nothing else: its MCA settings are
    repeated), `horovodrun --gloo` for Gloo. With cpus, under `taskset -c CPUS`: every rank
    inherits that affinity. With hosts ("node1:2,node2:2"), mpirun started on node1 of the test
    cluster (see cluster()) places the ranks on those hosts."""
    pin = ["taskset", "-c", cpus] if cpus else []
    if controller == "gloo":
        return [*pin, shutil.which("horovodrun") or "horovodrun", "-np", str(np_), "--gloo"]
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    mpirun = shutil.which("mpirun") or "mpirun"
    command = [mpirun, *root, "--oversubscribe", "--bind-to", "none", *MCA, "-np", str(np_)]
    if hosts:  # the remote ranks get only what -x names (and OMPI_MCA_* settings)
        return ["bash", str(CLUSTER), "exec", "node1", *command, "--host", hosts, "-x", "PATH"]
    return [*pin, *command]


def cluster_unavailable() -> str | None:
    """Why the test cluster cannot be built here, or None."""
    if os.geteuid() != 0:
        return "the test cluster needs root (network namespaces, sshd)"
    return None


@contextlib.contextmanager
def cluster(nodes: int) -> Iterator[None]:
    """The test cluster up (ci/cluster.sh up N), and down on every way out."""
    try:
        up = subprocess.run(
            ["bash", str(CLUSTER), "up", str(nodes)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,  # may apt-get install iproute2 and openssh-server first
        )
        if up.returncode != 0:
            raise LaunchError(
                f"ci/cluster.sh up {nodes} failed: {(up.stderr or up.stdout).strip()}"
            )
        yield
    finally:
        subprocess.run(["bash", str(CLUSTER), "down"], stdin=subprocess.DEVNULL, timeout=120)


def watched_tool(
    np_: int,
    args: list[str],
    cpus: str | None = None,
    env: dict[str, str] | None = None,
    controller: str = "mpi",
    hosts: str | None = None,
    python: str = sys.executable,
) -> dict:
    """Run hvd-linreg through bench/watch_tool.py with that python: peak RSS per rank, rank
    0's step-log times, and the tool's metrics under "metrics"."""
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        metrics, watched = Path(tmp) / "metrics.json", Path(tmp) / "watched.json"
        program = [python, str(BENCH / "watch_tool.py"), str(watched), *args]
        command = [*launcher(np_, controller, cpus=cpus, hosts=hosts), *program]
        _run([*command, "--metrics_json", str(metrics)], env)
        return {**json.loads(watched.read_text()), "metrics": json.loads(metrics.read_text())}


def script(
    np_: int,
    name: str,
    args: list[str],
    controller: str = "mpi",
    env: dict[str, str] | None = None,
    hosts: str | None = None,
    cpus: str | None = None,
) -> dict:
    """`LAUNCHER -np N python bench/NAME ARGS --out PATH`; return rank 0's JSON."""
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        out = Path(tmp) / "result.json"
        program = [sys.executable, str(BENCH / name), *args, "--out", str(out)]
        _run([*launcher(np_, controller, cpus=cpus, hosts=hosts), *program], env)
        return json.loads(out.read_text())


def run_python(args: list[str]) -> str:
    """`python bench/ARGS...` in this interpreter, to its end."""
    return _run([sys.executable, str(BENCH / args[0]), *args[1:]])


def importable(module: str) -> bool:
    """Whether this interpreter can import module (an optional peer)."""
    return (
        subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode
        == 0
    )


def peer_fit(
    name: str,
    peer: str,
    data: str,
    env: dict[str, str] | None = None,
    timeout_s=LAUNCH_TIMEOUT_S,
    extra: tuple[str, ...] = (),
) -> dict:
    """`python bench/NAME --peer PEER --data DATA [EXTRA] --out PATH` in a process of its own;
    its JSON."""
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        out = Path(tmp) / "result.json"
        command = [sys.executable, str(BENCH / name), "--peer", peer, "--data", data, *extra]
        _run([*command, "--out", str(out)], env, timeout_s)
        return json.loads(out.read_text())


def free_ports(count: int) -> list[int]:
    """Ports on 127.0.0.1 that nobody listens on right now."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def workers(np_: int, name: str, args: list[str]) -> dict:
    """N local processes of bench/NAME, each with a TF_CONFIG naming all N on localhost, as
    MultiWorkerMirroredStrategy expects; return worker 0's JSON."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(np_)]}
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        out = Path(tmp) / "result.json"
        logs = [Path(tmp) / f"worker{i}.log" for i in range(np_)]
        procs = []
        for index, log in enumerate(logs):
            tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
            with open(log, "w") as stderr:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, str(BENCH / name), *args, "--out", str(out)],
                        env={**os.environ, "TF_CONFIG": json.dumps(tf_config)},
                        cwd=REPO,
                        stdin=subprocess.DEVNULL,
                        stdout=stderr,
                        stderr=subprocess.STDOUT,
                    )
                )
        deadline = time.monotonic() + LAUNCH_TIMEOUT_S
        try:
            for p in procs:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise LaunchError(
                f"{name}: {np_} workers timed out after {LAUNCH_TIMEOUT_S} s"
            ) from None
        finally:
            for p in procs:  # a worker whose peer died waits for it forever: end them all
                if p.poll() is None:
                    p.kill()
                    p.wait()
        failed = [i for i, p in enumerate(procs) if p.returncode != 0]
        if failed:
            tail = logs[failed[0]].read_text()[-1500:]
            raise LaunchError(f"{name}: worker {failed[0]} of {np_} failed\n{tail}")
        return json.loads(out.read_text())
