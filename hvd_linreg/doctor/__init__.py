"""`hvd-linreg doctor`: is this machine ready to run the tool on several ranks?

It prints the versions of Python, TensorFlow, Horovod, MPI and mpi4py, what Horovod was built
with, and whether `horovodrun` and `mpirun` can really start 2 ranks that allreduce; every
failure comes with one line saying how to fix it. Exit code 0 when all is well, 1 otherwise,
2 for a bad flag.

This module is the command and the checks of this machine's packages; launch.py holds the
launch test, hosts.py the checks across hosts (--hosts), check.py what a check reports.
"""

from __future__ import annotations

import argparse
import math
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from hvd_linreg.doctor.check import INSTALL_MPI, INSTALL_PACKAGES, Check, first_line
from hvd_linreg.doctor.hosts import check_hosts, parse_hosts, read_hostfile
from hvd_linreg.doctor.launch import RANKS, check_launch, mpirun_command
from hvd_linreg.runtime.ranks import say
from hvd_linreg.runtime.startup import quiet_tensorflow

DEFAULT_TIMEOUT_S = 90.0
BUILD_RECORD = "horovod-build.txt"  # written by ci/setup.sh into the venv


def rebuild_horovod(missing: str) -> str:
    """How to rebuild Horovod when its build lacks something."""
    return (
        f"rebuild Horovod with {missing}: remove ${{XDG_CACHE_HOME:-~/.cache}}/hvd_linreg/wheels "
        "and run `make clean setup` (MPI needs Open MPI's headers: "
        "apt-get install libopenmpi-dev; Gloo needs cmake)"
    )


def check_python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    if (3, 11) <= sys.version_info[:2] <= (3, 13):
        return Check(f"Python {version}", True, sys.executable)
    return Check(
        f"Python {version}",
        False,
        f"{sys.executable}; the stack ci/setup.sh installs (TensorFlow 2.21) is for Python 3.11 "
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
        yield Check("TensorFlow cannot be imported", False, first_line(e), INSTALL_PACKAGES)
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
    built = horovod_build_record().get("tensorflow")
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
    patches = horovod_build_record().get("patches")
    if patches:
        yield Check(f"Horovod patched: {patches}", True, "ci/horovod-patches/")


def horovod_build_record() -> dict[str, str]:
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
            first_line(e),
            rebuild_horovod("HOROVOD_WITH_TENSORFLOW=1 against this TensorFlow"),
        )
        return
    yield Check(f"Horovod {horovod.__version__}", True)

    frameworks = _frameworks_built(horovod.__file__, check_extension)
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


def _frameworks_built(horovod_file: str, check_extension) -> dict[str, bool]:
    """Which frameworks Horovod has an extension for, by Horovod's own test of each
    (horovodrun --check-build imports each one instead, and horovod.torch swallows its
    missing extension, so it wrongly lists PyTorch)."""
    frameworks = {}
    for framework, package, library in (
        ("TensorFlow", "tensorflow", "mpi_lib"),
        ("PyTorch", "torch", "mpi_lib_v2"),
        ("MXNet", "mxnet", "mpi_lib"),
    ):
        try:
            check_extension(f"horovod.{package}", "", horovod_file, package, library)
            frameworks[framework] = True
        except ImportError:
            frameworks[framework] = False
    return frameworks


def _built(parts: dict[str, object]) -> str:
    """'MPI, Gloo' for {'MPI': True, 'Gloo': 1, 'NCCL': False}; 'none' when nothing is."""
    return ", ".join(name for name, built in parts.items() if built) or "none"


def check_mpirun(mpirun: str) -> Check:
    try:
        proc = subprocess.run(
            [mpirun, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check("mpirun does not run", False, first_line(e), INSTALL_MPI)
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
        return Check("mpi4py cannot be imported", False, first_line(e), INSTALL_PACKAGES)
    return Check(f"mpi4py {mpi4py.__version__}", True, library)


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
