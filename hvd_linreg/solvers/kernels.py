"""Compiled kernels of the solvers' innermost loops, built once with the C compiler the set-up
already needs (Horovod's and mpi4py's builds) and kept in the cache beside the Horovod wheel;
where none can be built, the solvers run their Python loops, which give the same bytes.

sweep.c: coordinate descent's sweep (coordinate_descent.py), a loop over coordinates whose
every step depends on the one before: in Python each costs a microsecond of interpreter beside
its vector update, and a sweep of a few thousand active coefficients (a wide design's path)
took tens of milliseconds."""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).with_name("sweep.c")
FLAGS = ["-O2", "-fPIC", "-shared", "-ffp-contract=off"]  # no FMA: _sweep's rounding


def _cache() -> Path:
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(home) / "hvd_linreg" / "kernels"


@cache
def sweep():
    """The compiled sweep (a ctypes function), or None where it cannot be built or loaded."""
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        return None
    key = hashlib.sha256(SOURCE.read_bytes() + " ".join(FLAGS).encode()).hexdigest()[:16]
    built = _cache() / f"sweep-{key}.so"
    try:
        if not built.exists():
            _build(compiler, built)
        library = ctypes.CDLL(str(built))
    except (OSError, subprocess.SubprocessError):
        return None
    function = library.sweep
    double, long = ctypes.c_double, ctypes.c_long
    pointer = np.ctypeslib.ndpointer
    doubles = pointer(np.float64, flags="C_CONTIGUOUS")
    indices = pointer(np.int64, flags="C_CONTIGUOUS")
    # H, n, gradient, beta, diag, l1, l2, lower, upper, coords, m, at_threshold
    function.argtypes = [doubles, long, *[doubles] * 7, indices, long, double]
    function.restype = double
    return function


def _build(compiler: str, built: Path) -> None:
    """Compile sweep.c into built, atomically, one process at a time (ranks share a cache)."""
    built.parent.mkdir(parents=True, exist_ok=True)
    with open(built.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if built.exists():
            return
        with tempfile.TemporaryDirectory(dir=built.parent) as tmp:
            out = Path(tmp) / built.name
            subprocess.run([compiler, *FLAGS, str(SOURCE), "-o", str(out), "-lm"], check=True,
                           capture_output=True, timeout=120)  # fmt: skip
            os.replace(out, built)
