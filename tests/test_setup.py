"""ci/setup.sh stops in its first seconds, before any download, and says what is missing."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LAUNCH_TIMEOUT_S, REPO, launcher_env
from hvd_linreg.doctor import horovod_build_record

SETUP = str(REPO / "ci" / "setup.sh")
# What the script itself runs before its checks are done: nothing else is on the bare PATH.
SHELL_TOOLS = ("bash", "cat", "cksum", "dirname", "grep", "head", "id", "sed", "tr")


def run_setup(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", SETUP],
        capture_output=True,
        text=True,
        env=env,
        timeout=LAUNCH_TIMEOUT_S,
        check=False,
    )


def bare_path(tmp_path: Path, python: str) -> str:
    """A PATH with a Python and the shell's tools, and no compiler, MPI or apt-get."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in SHELL_TOOLS:
        (bin_dir / tool).symlink_to(shutil.which(tool))
    (bin_dir / "python3").symlink_to(python)
    return str(bin_dir)


@pytest.mark.skipif(os.geteuid() != 0, reason="as another user the message says sudo")
def test_missing_compilers_and_mpi_are_named_in_one_message(tmp_path):
    python = os.path.realpath(sys.executable)  # the real interpreter behind the venv
    venv = tmp_path / "venv"
    proc = run_setup(
        {"PATH": bare_path(tmp_path, python), "VENV": str(venv), "HOME": str(tmp_path)}
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = proc.stderr
    assert err.startswith("setup: error: this machine lacks what the set-up needs"), err
    for line in (
        "- a C compiler: gcc",
        "- a C++ compiler (Horovod is C++): g++",
        "- git (applies ci/horovod-patches/ to Horovod's source): git",
        "- Open MPI with its headers: openmpi-bin libopenmpi-dev",
    ):
        assert line in err
    # No apt-get on this PATH: the packages are named, not installed.
    assert "Install them (apt-get install gcc g++ git openmpi-bin libopenmpi-dev)" in err
    assert not venv.exists(), "set-up went on after finding what is missing"
    assert proc.stdout == ""


def _python(version: str) -> str | None:
    """A Python of that version on PATH or in pyenv, if this machine has one."""
    candidates = [
        f"python{version}",
        *glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python{version}")),
    ]
    for candidate in candidates:
        try:
            found = subprocess.run(
                [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
        except OSError:
            continue
        if found == version:
            return candidate
    return None


def test_python_310_is_refused_with_the_pythons_that_work(tmp_path):
    python = _python("3.10")
    if python is None:
        pytest.skip("no Python 3.10 on this machine")
    venv = tmp_path / "venv"
    proc = run_setup(launcher_env({"PYTHON": python, "VENV": str(venv)}))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"setup: error: PYTHON={python} is Python 3.10." in proc.stderr
    assert "(TensorFlow 2.21.0) is for Python 3.11, 3.12, 3.13." in proc.stderr
    assert "Python 3.10 and older are past their" in proc.stderr
    assert "Python 3.14 needs TensorFlow 2.22" in proc.stderr
    assert not venv.exists()


def test_a_python_that_does_not_run_is_named(tmp_path):
    proc = run_setup(launcher_env({"PYTHON": str(tmp_path / "python3.12"), "VENV": str(tmp_path)}))
    assert proc.returncode == 1
    assert f"setup: error: PYTHON={tmp_path / 'python3.12'} does not run" in proc.stderr


def plan_of(repo: Path, cache: Path) -> dict[str, str]:
    """`ci/setup.sh --plan` of a checkout: the wheel and venv it would use, and what it would do."""
    proc = subprocess.run(
        ["bash", str(repo / "ci" / "setup.sh"), "--plan"],
        capture_output=True,
        text=True,
        env=launcher_env({"XDG_CACHE_HOME": str(cache), "HVD_LINREG_KEYED_VENV": "1"}),
        timeout=LAUNCH_TIMEOUT_S,
        check=True,
    )
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines())


def test_a_change_to_the_patches_or_the_stack_rebuilds_the_horovod_wheel(tmp_path):
    """The wheel is found only under a key of all its inputs: the venv's own wheel is reused, and
    a checkout with one patch or one pin changed would build another (and set up another venv)."""
    wheel_dir = Path(horovod_build_record()["wheel"])  # this venv's Horovod came from there
    cache = wheel_dir.parent.parent.parent  # XDG_CACHE_HOME/hvd_linreg/wheels/<key>
    checkout = tmp_path / "repo"
    checkout.mkdir()
    shutil.copytree(REPO / "ci", checkout / "ci")
    shutil.copy(REPO / "setup.cfg", checkout / "setup.cfg")
    same = plan_of(checkout, cache)
    assert same["wheel"] == f"{wheel_dir} (reuse)"

    patch = sorted((checkout / "ci" / "horovod-patches").glob("*.patch"))[0]
    patch.write_text(patch.read_text() + "\n")
    patched = plan_of(checkout, cache)
    assert patched["wheel"].endswith(" (build)") and patched["venv"] != same["venv"]

    shutil.copy(REPO / "ci" / "horovod-patches" / patch.name, patch)
    stack = checkout / "ci" / "stacks" / "tf2.21.txt"
    stack.write_text(stack.read_text().replace("pandas==", "pandas==0.0.0 # "))
    restacked = plan_of(checkout, cache)
    assert restacked["wheel"].endswith(" (build)") and restacked["venv"] != same["venv"]
    assert len({same["wheel"], patched["wheel"], restacked["wheel"]}) == 3


@pytest.mark.core  # the other Pythons' venvs are keyed ones in CI: links from the clone
def test_the_venvs_scripts_run_its_own_python_by_its_real_path():
    """pip writes the interpreter's path into each console script. Through a clone's .venv link
    that path dies with the clone, and the next clone that reuses the keyed venv finds
    horovodrun with "a bad interpreter"."""
    home = Path(os.path.realpath(sys.prefix))
    firsts = {}
    for script in (home / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            with open(script, "rb") as f:
                firsts[script.name] = f.readline().decode(errors="replace").strip()
    pythons = {
        name: line for name, line in firsts.items() if line.startswith("#!") and "python" in line
    }
    assert {"horovodrun", "hvd-linreg", "pytest"} <= pythons.keys()
    foreign = {
        name: line for name, line in pythons.items() if not line.startswith(f"#!{home}/bin/")
    }
    assert not foreign, f"scripts that run another Python than {home}'s: {foreign}"


@pytest.mark.multiprocess
def test_horovodrun_asks_what_horovod_was_built_with_once_per_build(tmp_path, monkeypatch):
    """horovodrun keeps its answer to "built with MPI?" (10-remember-build-answers.patch), so
    that later launches do not load TensorFlow to ask again: a kept "no" is believed."""
    from horovod.common.util import _built_answer_path

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    command = [shutil.which("horovodrun"), "-np", "1", "--mpi", "true"]
    first = subprocess.run(
        command, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S, env=launcher_env()
    )
    assert first.returncode == 0, first.stdout + first.stderr
    kept = Path(_built_answer_path("mpi_built"))
    assert kept.read_text() == "true"
    kept.write_text("false")  # as if this build had no MPI: the launcher must not ask again
    second = subprocess.run(
        command, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S, env=launcher_env()
    )
    assert second.returncode != 0
    assert "MPI support has not been built" in second.stdout + second.stderr
