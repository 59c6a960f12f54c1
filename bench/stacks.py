"""Section 7: the same jobs on the 2023 stack and on today's, side by side.

The old stack (TensorFlow 2.15.1, NumPy 1, ci/stacks/tf2.15.txt) lives in .venv-tf215, made
by ci/setup.sh on the first run (Horovod built once more, a few minutes); the new one is the
project's .venv (ci/stacks/tf2.21.txt). Both run this checkout's code. In each round the two
stacks take turns, first one then the other, so that both see the same machine; every figure
is the median of the rounds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import launch

STACKS = {
    "old": ("tf2.15", launch.REPO / ".venv-tf215"),
    "new": ("tf2.21", launch.REPO / ".venv"),
}
# What a rank imports before its first step, as the tool imports it.
IMPORT = "\n".join(
    [
        "from hvd_linreg.runtime.startup import import_tensorflow",
        "import_tensorflow()",
        "import hvd_linreg.pipeline",
    ]
)


def ensure_venv(stack: str, venv: Path) -> None:
    """ci/setup.sh for that stack into venv; it returns at once when the venv is ready."""
    env = {**os.environ, "HVD_LINREG_STACK": stack, "VENV": str(venv)}
    env.pop("PYTHON", None)
    subprocess.run(["bash", str(launch.REPO / "ci" / "setup.sh")], env=env, check=True)


@contextmanager
def using(venv: Path) -> Iterator[str]:
    """This venv's tools first on PATH (horovodrun, hvd-linreg); yields its python."""
    saved = os.environ["PATH"]
    os.environ["PATH"] = f"{venv / 'bin'}{os.pathsep}{saved}"
    try:
        yield str(venv / "bin" / "python")
    finally:
        os.environ["PATH"] = saved


def versions(venv: Path) -> str:
    """What the stack in venv is, in one line."""
    code = (
        "import numpy, sys, tensorflow as tf\n"
        "print(f'TensorFlow {tf.__version__}, NumPy {numpy.__version__}, '\n"
        "      f'Python {sys.version.split()[0]}')"
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    python = str(venv / "bin" / "python")
    return subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()


if __name__ == "__main__":
    sys.exit("run it as a section of bench/run.py: make bench, or bench/run.py --sections 7")
