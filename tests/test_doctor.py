"""`hvd-linreg doctor`: versions, Horovod's build, real 2-rank launches, a fix for each failure."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from conftest import launcher_env
from hvd_linreg.doctor import DEFAULT_TIMEOUT_S, check_launch, main, mpirun_command

DOCTOR = [sys.executable, "-c", "from hvd_linreg.doctor import main; raise SystemExit(main())"]


def run_doctor(*args: str) -> subprocess.CompletedProcess:
    # The venv's tools first on PATH, as `make test` has them.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        [*DOCTOR, *args],
        capture_output=True,
        text=True,
        timeout=2 * DEFAULT_TIMEOUT_S + 60,
        stdin=subprocess.DEVNULL,
        env=launcher_env({"PATH": path}),
    )


@pytest.mark.multiprocess
def test_doctor_passes_here_with_versions_and_both_launchers():
    proc = run_doctor()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for start in (
        "ok    Python 3.",
        "ok    TensorFlow 2.",
        "ok    Keras 2.",
        "ok    Horovod built against TensorFlow 2.",
        "ok    Horovod patched: 01-xla-ops-gpu-only ",
        "ok    Horovod 0.28",
        "ok    Horovod frameworks: TensorFlow",
        "ok    Horovod controllers: MPI, Gloo",
        "ok    Horovod tensor operations: ",
        "ok    mpirun (Open MPI) ",
        "ok    mpi4py ",
        "ok    horovodrun starts 2 ranks",
        "ok    mpirun starts 2 ranks",
    ):
        assert any(line.startswith(start) for line in lines), f"no {start!r} in:\n{proc.stdout}"
    assert sum("allreduce over MPI gave 3" in line for line in lines) == 2
    assert lines[-1] == "doctor: all checks passed"


def test_missing_launchers_fail_with_a_fix_each():
    proc = run_doctor("--mpirun", "/nonexistent/mpirun", "--horovodrun", "/nonexistent/horovodrun")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "FAIL  mpirun does not run (FileNotFoundError: " in out
    assert "FAIL  mpirun cannot start 2 ranks (FileNotFoundError: " in out
    assert "FAIL  horovodrun cannot start 2 ranks (FileNotFoundError: " in out
    assert out.count("      fix: install Open MPI: apt-get install openmpi-bin libopenmpi-dev") == 2
    assert "      fix: run `make setup`" in out
    assert "ok    Horovod controllers: MPI, Gloo" in out  # the rest is still checked
    assert out.splitlines()[-1] == "doctor: 3 problem(s)"


@pytest.mark.multiprocess
def test_a_launch_that_hangs_times_out_and_leaves_no_rank_behind(tmp_path):
    # Real mpirun, real ranks that never finish: each is a shell that says it started, then
    # sleeps, tagged to be found. The timeout leaves mpirun time to start them even on a busy
    # machine: the check below is about ranks that ran, not about ranks never started.
    tag = f"doctor-test-{uuid.uuid4().hex}"
    started = tmp_path / "started"
    rank = f"touch {started}.$OMPI_COMM_WORLD_RANK; sleep 600; : {tag}"
    hanging = [*mpirun_command(shutil.which("mpirun")), "sh", "-c", rank]
    result = check_launch(hanging, timeout=20)
    assert not result.ok
    assert result.detail == "timed out after 20 s"
    assert "larger --timeout" in result.fix
    assert sorted(p.name for p in tmp_path.iterdir()) == ["started.0", "started.1"]
    left = [p for p in psutil.process_iter(["cmdline"]) if tag in " ".join(p.info["cmdline"] or [])]
    assert left == []


def test_more_ranks_than_slots_is_told_to_oversubscribe():
    too_many = str((os.cpu_count() or 1) + 1)
    result = check_launch([shutil.which("mpirun"), "--allow-run-as-root", "-np", too_many], 60)
    assert not result.ok
    assert "not enough slots" in result.detail
    assert result.fix.startswith("add --oversubscribe")


@pytest.mark.skipif(os.geteuid() != 0, reason="Open MPI refuses only root")
def test_root_without_allow_run_as_root_is_told_the_flag():
    result = check_launch([shutil.which("mpirun"), "-np", "2"], 60)
    assert not result.ok
    assert "attempt to run as root" in result.detail
    assert result.fix.startswith("as root, add --allow-run-as-root")


def test_bad_timeout_is_a_usage_error(capsys):
    assert main(["--timeout", "0"]) == 2
    assert "--timeout: must be a positive number of seconds, got '0'" in capsys.readouterr().err


def test_horovod_built_against_another_tensorflow_is_named(monkeypatch, tmp_path):
    import tensorflow as tf

    from hvd_linreg import doctor

    record = tmp_path / "horovod-build.txt"  # what ci/setup.sh writes next to the venv
    record.write_text("tensorflow 2.0.0\npython 3.11\n")
    monkeypatch.setattr(doctor, "BUILD_RECORD", str(record))  # absolute: replaces the venv's
    failed = [r for r in doctor.check_tensorflow() if not r.ok]
    assert [r.name for r in failed] == [
        f"Horovod was built against TensorFlow 2.0.0, not the installed {tf.__version__}"
    ]
    assert failed[0].fix.startswith(f"rebuild Horovod with TensorFlow {tf.__version__}: remove ")
