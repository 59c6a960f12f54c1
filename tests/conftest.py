"""Launch the real tool: in-process, or as N ranks under horovodrun (MPI or Gloo) or mpirun."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
# Safety net only: every launch here should end in seconds; a hang fails instead of blocking CI.
LAUNCH_TIMEOUT_S = 180


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    metrics: dict | None

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def launch_command(launcher: str, np_: int, extra: tuple[str, ...] = ()) -> list[str]:
    """The command line a user would type for each launcher (root on a 2-core machine)."""
    if launcher == "python":
        return [sys.executable, "-m", "hvd_linreg"]
    if launcher in ("horovodrun-mpi", "horovodrun-gloo"):
        controller = "--mpi" if launcher.endswith("mpi") else "--gloo"
        return [shutil.which("horovodrun"), "-np", str(np_), controller, *extra, "hvd-linreg"]
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
            "hvd-linreg",
        ]
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
) -> Run:
    """Run to the end; with metrics=True the tool also writes its metrics JSON, read back."""
    metrics_path = tmp_path / f"metrics-{launcher}-{np_}-{len(list(tmp_path.iterdir()))}.json"
    cmd = [*launch_command(launcher, np_, launcher_args), *args]
    if metrics:
        cmd += ["--metrics_json", str(metrics_path)]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp_path, stdin=subprocess.DEVNULL
    )
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else None
    return Run(proc.returncode, proc.stdout, proc.stderr, metrics)


def params_of(metrics: dict) -> np.ndarray:
    return np.append(metrics["w"], metrics["b"])


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
