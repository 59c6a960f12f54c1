"""`hvd-linreg doctor`: is this machine ready to run the tool on several ranks?

It prints the versions of Python, TensorFlow, Horovod, MPI and mpi4py, what Horovod was built
with, and whether `horovodrun` and `mpirun` can really start 2 ranks that allreduce; every
failure comes with one line saying how to fix it. Exit code 0 when all is well, 1 otherwise,
2 for a bad flag.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil  # a Horovod dependency

from hvd_linreg.ranks import say
from hvd_linreg.startup import quiet_tensorflow

RANKS = 2
DEFAULT_TIMEOUT_S = 90.0
BUILD_RECORD = "horovod-build.txt"  # written by ci/setup.sh into the venv
# Open MPI settings of the network (interfaces, keep-alives), which the launch checks keep.
USER_MCA = ("OMPI_MCA_btl_", "OMPI_MCA_oob_")

INSTALL_PACKAGES = (
    "run `make setup` in the repository (it installs the pinned packages into .venv), "
    "then put .venv/bin first on PATH"
)
INSTALL_MPI = (
    "install Open MPI: apt-get install openmpi-bin libopenmpi-dev "
    "(on a cluster: module load openmpi), then `make setup`"
)

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


@dataclass(frozen=True)
class Check:
    """The outcome of one check: what it saw and, when it failed, how to fix it."""

    name: str
    ok: bool
    detail: str = ""
    fix: str = ""
    skipped: bool = False  # not run, because of failures before it (which count, not this)

    def lines(self) -> list[str]:
        status = "skip" if self.skipped else "ok" if self.ok else "FAIL"
        detail = f" ({self.detail})" if self.detail else ""
        fix = [f"      fix: {self.fix}"] if self.fix and not self.ok else []
        return [f"{status:<6}{self.name}{detail}", *fix]


def rebuild_horovod(missing: str) -> str:
    """How to rebuild Horovod when its build lacks something."""
    return (
        f"rebuild Horovod with {missing}: remove ~/.cache/hvd_linreg/wheels (or "
        "$HVD_LINREG_CACHE/wheels) and run `make clean setup` (MPI needs Open MPI's headers: "
        "apt-get install libopenmpi-dev; Gloo needs cmake)"
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def check_python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    if (3, 10) <= sys.version_info[:2] <= (3, 13):
        return Check(f"Python {version}", True, sys.executable)
    return Check(
        f"Python {version}",
        False,
        f"{sys.executable}; the stack ci/setup.sh installs (TensorFlow 2.21) is for Python 3.10 "
        "to 3.13 (3.14 needs TensorFlow 2.22)",
        "PYTHON=/path/to/python3.13 make clean setup",
    )


def check_tensorflow() -> Iterator[Check]:
    """TensorFlow's version, the Keras behind tf.keras, and the TensorFlow Horovod was built
    against (ci/setup.sh records it next to the venv)."""
    try:
        from importlib.metadata import version

        import tensorflow as tf

        # tf.keras is a lazy module: its name says which package TensorFlow loaded for it.
        package = "tf-keras" if tf.keras.__name__.startswith("tf_keras") else "keras"
        keras_version = version(package)
    except Exception as e:
        yield Check("TensorFlow cannot be imported", False, _first_line(e), INSTALL_PACKAGES)
        return
    yield Check(f"TensorFlow {tf.__version__}", True)
    # Horovod's Keras optimizer wrapper needs Keras 2: built into TensorFlow up to 2.15, the
    # tf-keras package (with TF_USE_LEGACY_KERAS=1, which the tool sets) from 2.16 on.
    yield Check(
        f"Keras {keras_version} ({package})",
        keras_version.startswith("2."),
        "" if keras_version.startswith("2.") else "Horovod's optimizer wrapper needs Keras 2",
        f"pip install 'tf-keras=={'.'.join(tf.__version__.split('.')[:2])}.*' "
        "(TF_USE_LEGACY_KERAS=1 then selects it; hvd-linreg sets it)",
    )
    built = _horovod_build_record().get("tensorflow")
    if built is None:
        yield Check("Horovod's build record", True, "none: Horovod was not built by ci/setup.sh")
    elif built != tf.__version__:
        yield Check(
            f"Horovod was built against TensorFlow {built}, not the installed {tf.__version__}",
            False,
            str(Path(sys.prefix) / BUILD_RECORD),
            rebuild_horovod(f"TensorFlow {tf.__version__}"),
        )
    else:
        yield Check(f"Horovod built against TensorFlow {built}", True)
    patches = _horovod_build_record().get("patches")
    if patches:
        yield Check(f"Horovod patched: {patches}", True, "ci/horovod-patches/")


def _horovod_build_record() -> dict[str, str]:
    """What ci/setup.sh compiled Horovod against: 'name value' lines next to the venv."""
    try:
        text = (Path(sys.prefix) / BUILD_RECORD).read_text()
    except OSError:
        return {}
    return dict(line.split(" ", 1) for line in text.splitlines() if " " in line)


def check_horovod() -> Iterator[Check]:
    """Horovod's version and what it was built with, read from its TensorFlow extension."""
    try:
        import horovod
        import horovod.tensorflow as hvd
        from horovod.common.util import check_extension
    except Exception as e:
        # Typically an undefined symbol: Horovod was built against another TensorFlow or MPI.
        yield Check(
            "Horovod cannot be imported with TensorFlow",
            False,
            _first_line(e),
            rebuild_horovod("HOROVOD_WITH_TENSORFLOW=1 against this TensorFlow"),
        )
        return
    yield Check(f"Horovod {horovod.__version__}", True)

    # Horovod's own test of a framework's extension (horovodrun --check-build imports each one
    # instead, and horovod.torch swallows its missing extension, so it wrongly lists PyTorch).
    frameworks = {}
    for framework, package, library in (
        ("TensorFlow", "tensorflow", "mpi_lib"),
        ("PyTorch", "torch", "mpi_lib_v2"),
        ("MXNet", "mxnet", "mpi_lib"),
    ):
        try:
            check_extension(f"horovod.{package}", "", horovod.__file__, package, library)
            frameworks[framework] = True
        except ImportError:
            frameworks[framework] = False
    yield Check(
        f"Horovod frameworks: {_built(frameworks)}",
        frameworks["TensorFlow"],
        "" if frameworks["TensorFlow"] else "TensorFlow missing",
        rebuild_horovod("HOROVOD_WITH_TENSORFLOW=1"),
    )

    controllers = {"MPI": hvd.mpi_built(), "Gloo": hvd.gloo_built()}
    missing = [name for name, built in controllers.items() if not built]
    yield Check(
        f"Horovod controllers: {_built(controllers)}",
        not missing,
        f"{' and '.join(missing)} missing" if missing else "",
        rebuild_horovod(" ".join(f"HOROVOD_WITH_{name.upper()}=1" for name in missing)),
    )

    # Only informative: on CPUs the tensors travel over MPI or Gloo, checked just above.
    operations = {"NCCL": hvd.nccl_built(), "DDL": hvd.ddl_built(), "CCL": hvd.ccl_built()}
    gpus = {"CUDA": hvd.cuda_built(), "ROCm": hvd.rocm_built()}
    yield Check(
        f"Horovod tensor operations: {_built({**operations, **controllers})}",
        True,
        f"GPU support: {_built(gpus)}",
    )


def _built(parts: dict[str, object]) -> str:
    """'MPI, Gloo' for {'MPI': True, 'Gloo': 1, 'NCCL': False}; 'none' when nothing is."""
    return ", ".join(name for name, built in parts.items() if built) or "none"


def check_mpirun(mpirun: str) -> Check:
    try:
        proc = subprocess.run(
            [mpirun, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check("mpirun does not run", False, _first_line(e), INSTALL_MPI)
    first = (proc.stdout or proc.stderr).strip().splitlines()[:1]
    if proc.returncode != 0 or not first:
        detail = f"{mpirun}, exit code {proc.returncode}"
        return Check("mpirun --version failed", False, detail, INSTALL_MPI)
    return Check(first[0], True, shutil.which(mpirun) or mpirun)


def check_mpi4py() -> Check:
    try:
        import mpi4py

        # Only ask for the library's version: MPI_Init here would leave OMPI_* variables that
        # confuse the launchers started below.
        mpi4py.rc.initialize = False
        from mpi4py import MPI

        library = MPI.Get_library_version().strip("\x00 \n").splitlines()[0].split(",")[0]
    except Exception as e:
        return Check("mpi4py cannot be imported", False, _first_line(e), INSTALL_PACKAGES)
    return Check(f"mpi4py {mpi4py.__version__}", True, library)


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
    # OMPI_*/PMIX_* variables that a launcher or an MPI_Init left here (doctor run as a rank,
    # from a test) would make the new mpirun join that old job instead of starting its own.
    # Launchers never set the network's (btl_*, oob_*): those are the user's, and kept.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OMPI_", "PMIX_")) or k.startswith(USER_MCA)
    }
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            [*launcher, sys.executable, "-c", ALLREDUCE_SCRIPT],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
    except OSError as e:
        fix = INSTALL_MPI if name == "mpirun" else INSTALL_PACKAGES
        return Check(f"{name} cannot start {ranks} ranks", False, _first_line(e), fix)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(proc.pid)
        proc.communicate()
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
    if proc.returncode == 0 and found and found.group(1, 2) == (str(ranks), str(total)):
        return Check(
            f"{name} starts {ranks} ranks",
            True,
            f"{command}: allreduce over {found.group(3)} gave {total} in {took:.1f} s",
        )
    seen, fix = _diagnose(output)
    if found:  # the ranks ran, but not as one job of all of them
        seen = f"allreduce over {found.group(1)} ranks gave {found.group(2)}"
    return Check(
        f"{name} cannot start {ranks} ranks",
        False,
        f"exit code {proc.returncode}: {seen}",
        fix or f"run it by hand to see the whole error: {by_hand}",
    )


def _kill_tree(pid: int) -> None:
    """Kill a launcher and every process under it: Open MPI puts each rank in its own process
    group, so killing the launcher's group would leave the ranks running."""
    launcher = psutil.Process(pid)
    for process in [*launcher.children(recursive=True), launcher]:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass


def _diagnose(output: str) -> tuple[str, str | None]:
    """The line of a launcher's output that best says what went wrong, and its fix if known."""
    lines = [line.strip() for line in output.splitlines() if line.strip(" -")]
    for text, fix in KNOWN_LAUNCH_PROBLEMS:
        for line in lines:
            if text in line:
                return line[:200], fix
    errors = [line for line in lines if "rror" in line]
    return (errors or lines or ["no output"])[-1][:200], None


# What each host says about itself over ssh, in one line (host_report).
HOST_SCRIPT = "from hvd_linreg.doctor import host_report; host_report()"
SAME_VENV = (
    "every node needs the same venv at the same path: a shared file system, or `make setup` in "
    "a checkout at the same path on that node"
)


def parse_hosts(spec: str) -> list[tuple[str, int]]:
    """'node1:2,node2:2' (horovodrun's -H) as [(host, slots), ...]."""
    hosts = []
    for part in spec.split(","):
        host, _, slots = part.strip().partition(":")
        if not host or not (slots or "1").isdigit() or int(slots or "1") < 1:
            raise argparse.ArgumentTypeError(f"expected host:slots,host:slots..., got {spec!r}")
        hosts.append((host, int(slots or "1")))
    return hosts


def read_hostfile(path: str) -> list[tuple[str, int]]:
    """A hostfile of 'host slots=N' lines (what horovodrun and mpirun read)."""
    try:
        with open(path) as f:
            lines = [line.split() for line in f if line.strip()]
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {e.strerror}") from None
    return parse_hosts(
        ",".join(f"{w[0]}:{w[1].removeprefix('slots=')}" if len(w) > 1 else w[0] for w in lines)
    )


def host_report() -> None:
    """Print what this host is, for the node that runs the doctor: its name, whether that name
    can carry a job across hosts (the tool's own check), the address the name resolves to, its
    IPv4 networks and the versions the tool would report here."""
    import socket

    from hvd_linreg.ranks import host_name_problem
    from hvd_linreg.report import versions

    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
    except OSError:
        address = None
    networks = [
        (nic, f"{a.address}/{a.netmask}")
        for nic, addresses in psutil.net_if_addrs().items()
        for a in addresses
        if a.family == socket.AF_INET and not ipaddress.ip_address(a.address).is_loopback
    ]
    report = {
        "name": name,
        "problem": host_name_problem(spans_hosts=True, gloo=True),
        "address": address,
        "networks": networks,
        "versions": versions(),
    }
    say("doctor-host " + json.dumps(report))


def check_host(host: str, timeout: float) -> tuple[Check, dict | None]:
    """ssh to the host, run this Python there; the result and what the host reported."""
    forward = [f"PYTHONPATH={os.environ['PYTHONPATH']}"] if os.environ.get("PYTHONPATH") else []
    remote = shlex.join(
        ["env", "TF_CPP_MIN_LOG_LEVEL=2", *forward, sys.executable, "-c", HOST_SCRIPT]
    )
    ssh = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={math.ceil(timeout)}", host, remote]
    try:
        proc = subprocess.run(ssh, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return Check(f"{host}: no answer", False, f"ssh timed out after {timeout:g} s"), None
    found = re.search(r"^doctor-host (.*)$", proc.stdout, re.MULTILINE)
    if proc.returncode == 255 and not found:
        seen = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        fix = f"password-less ssh from this node: ssh-keygen, then ssh-copy-id {host}"
        return Check(f"{host}: ssh fails", False, seen, fix), None
    if not found:
        seen, _ = _diagnose(proc.stdout + proc.stderr)
        return Check(f"{host}: cannot run {sys.executable}", False, seen, SAME_VENV), None
    report = json.loads(found.group(1))
    name = report["name"]
    if report["problem"]:
        return Check(f"{host}: host name {name!r}", False, "", report["problem"]), report
    from hvd_linreg.report import versions  # imports TensorFlow: only once a host answered

    here = versions()
    differ = [f"{k} {v} (here {here[k]})" for k, v in report["versions"].items() if here[k] != v]
    if differ:
        return Check(f"{host}: other versions", False, ", ".join(differ), SAME_VENV), report
    return Check(f"{host}: {name}, same Python and packages at {sys.executable}", True), report


def interface_setting(nic: str) -> str:
    """The one setting that names the hosts' network interface, as each launcher takes it."""
    return (
        f"export OMPI_MCA_btl_tcp_if_include={nic} OMPI_MCA_oob_tcp_if_include={nic} "
        f"(mpirun), horovodrun --network-interfaces {nic}"
    )


def check_network(reports: dict[str, dict]) -> Check:
    """The hosts share an IPv4 network on which each has its own address, their names resolve
    to addresses on it, and no other network looks shared to Open MPI when it is not."""
    seen: dict[ipaddress.IPv4Network, dict[str, tuple[str, str]]] = {}
    for host, report in reports.items():
        for nic, address in report["networks"]:
            interface = ipaddress.ip_interface(address)
            seen.setdefault(interface.network, {})[host] = (nic, str(interface.ip))
    own = {net: on for net, on in seen.items() if len({ip for _, ip in on.values()}) == len(on)}
    shared = [net for net, on in own.items() if len(on) == len(reports)]
    if not shared:
        where = "; ".join(
            f"{host} {', '.join(f'{a} ({nic})' for nic, a in r['networks']) or 'none'}"
            for host, r in reports.items()
        )
        return Check(
            "the hosts share no network",
            False,
            where,
            "connect every host to one IPv4 network (one subnet), then name its interface: "
            + interface_setting("NIC"),
        )
    nics = sorted({nic for net in shared for nic, _ in seen[net].values()})
    named = ", ".join(
        f"{net} ({'/'.join(sorted({n for n, _ in seen[net].values()}))})" for net in shared
    )
    for host, report in reports.items():
        address = report["address"]
        if address and not any(ipaddress.ip_address(address) in net for net in shared):
            return Check(
                f"{host}'s name {report['name']!r} resolves to {address}, not on {named}",
                False,
                "Gloo ranks bind to that address, and the other hosts cannot reach it",
                f"map {report['name']} to its address on {named} in /etc/hosts or DNS",
            )
    # The same address on several hosts (a docker0 bridge on each, say): Open MPI takes it for a
    # network between them, connects there to itself and hangs, unless told the interface.
    clashes = [net for net, on in seen.items() if len(on) > 1 and net not in own]
    if clashes and not _mpi_interface_named():
        net = clashes[0]
        hosts = sorted(seen[net])
        nic, address = seen[net][hosts[0]]
        return Check(
            f"the same address {address} ({nic}, {net}) on {' and '.join(hosts)}",
            False,
            f"not a network between them, but mpirun may try it and hang; they share {named}",
            "name the interface the hosts share: " + interface_setting(nics[0]),
        )
    return Check(f"the hosts share {named}", True, "each host with its own address there")


def _mpi_interface_named() -> bool:
    return bool(os.environ.get("OMPI_MCA_btl_tcp_if_include"))


def check_hosts(
    hosts: list[tuple[str, int]], mpirun: str, horovodrun: str, timeout: float
) -> Iterator[Check]:
    """Each host over ssh, unique names, a shared network, then a real allreduce across all of
    them per launcher (only when the hosts passed: else the launches could only fail, slowly)."""
    reports: dict[str, dict] = {}
    named: dict[str, str] = {}
    passed = True
    for host, _ in hosts:
        result, report = check_host(host, timeout)
        yield result
        passed &= result.ok
        if report is None:
            continue
        reports[host] = report
        name = report["name"]
        if name in named:
            passed = False
            yield Check(
                f"{host} and {named[name]} are both called {name!r}",
                False,
                "",
                "give each host its own name (hostnamectl set-hostname NAME), with its own "
                "address in /etc/hosts or DNS",
            )
        named.setdefault(name, host)
    if len(reports) == len(hosts):
        network = check_network(reports)
        yield network
        passed &= network.ok
    if not passed:
        yield Check("launches across the hosts", True, "fix the problems above first", skipped=True)
        return
    spec = ",".join(f"{host}:{slots}" for host, slots in hosts)
    ranks = sum(slots for _, slots in hosts)
    forward = [a for v in ("PATH", "PYTHONPATH") if v in os.environ for a in ("-x", v)]
    horovodrun_hosts = [horovodrun, "-np", str(ranks), "-H", spec]
    yield check_launch(horovodrun_hosts, timeout, ranks)
    yield check_launch([*horovodrun_hosts, "--gloo"], timeout, ranks)
    yield check_launch([*mpirun_command(mpirun, ranks), "--host", spec, *forward], timeout, ranks)


def run_checks(mpirun: str, horovodrun: str, timeout: float) -> Iterator[Check]:
    """Every check in order: versions and builds first, then the real launches."""
    yield check_python()
    yield from check_tensorflow()
    yield from check_horovod()
    yield check_mpirun(mpirun)
    yield check_mpi4py()
    yield check_launch([horovodrun, "-np", str(RANKS)], timeout)
    yield check_launch(mpirun_command(mpirun), timeout)


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return seconds


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hvd-linreg doctor",
        description="Check that this machine can run hvd-linreg on several ranks: versions, "
        f"Horovod's build, and a real {RANKS}-rank allreduce under horovodrun and mpirun.",
        allow_abbrev=False,
    )
    p.add_argument(
        "--mpirun",
        metavar="PATH",
        default=shutil.which("mpirun") or "mpirun",
        help="the mpirun to check (default: the one on PATH; horovodrun always uses that one)",
    )
    p.add_argument(
        "--horovodrun",
        metavar="PATH",
        default=shutil.which("horovodrun") or "horovodrun",
        help="the horovodrun to check (default: the one on PATH)",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--hosts",
        type=parse_hosts,
        metavar="HOST:SLOTS,...",
        help="check these hosts instead of this machine: ssh, the same venv, host names, and a "
        "real allreduce across them under horovodrun (MPI and Gloo) and mpirun",
    )
    where.add_argument(
        "--hostfile", type=read_hostfile, metavar="FILE", help="--hosts from a hostfile"
    )
    p.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"give up on a launch after this long (default {DEFAULT_TIMEOUT_S:g})",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Run every check, print one line each (and a fix for each failure); 0 if all passed."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help (0), or a bad flag (2) that argparse has explained
        return int(e.code or 0)
    quiet_tensorflow()  # the ranks inherit it too
    hosts = args.hosts or args.hostfile
    checks = (
        check_hosts(hosts, args.mpirun, args.horovodrun, args.timeout)
        if hosts
        else run_checks(args.mpirun, args.horovodrun, args.timeout)
    )
    problems = 0
    for result in checks:
        for line in result.lines():
            say(line)
        problems += not result.ok
    say("doctor: all checks passed" if problems == 0 else f"doctor: {problems} problem(s)")
    return 0 if problems == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
