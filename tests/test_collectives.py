"""An exact fit makes its collectives with MPI's own through mpi4py under an MPI launcher, with
Horovod's under Gloo, and with none in one process (collectives.py): every family's fit is the
same under each, at 2 and 3 ranks, and only Horovod's imports TensorFlow."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import LAUNCH_TIMEOUT_S, REPO, launch, launcher_env

SCRIPT = REPO / "tests" / "collectives_job.py"
TF_MODULES = ["tensorflow", "horovod.tensorflow"]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "fits.json"
    subprocess.run(
        [sys.executable, str(SCRIPT), str(out)],
        check=True,
        timeout=LAUNCH_TIMEOUT_S,
        env=launcher_env(),
        cwd=REPO / "tests",
        capture_output=True,
    )
    return json.loads(out.read_text())


def test_one_process_makes_no_collective_and_imports_no_tensorflow(one_process):
    assert one_process["controller"] == "none"
    assert one_process["imported"] == []


@pytest.mark.multiprocess
@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize(
    "launcher, controller, imported",
    [("mpirun", "mpi4py", []), ("horovodrun-gloo", "Gloo", TF_MODULES)],
)
def test_every_family_fits_the_same_by_every_means(
    one_process, tmp_path, launcher, controller, imported, size
):
    out = tmp_path / "fits.json"
    program = (sys.executable, str(SCRIPT), str(out))
    run = launch(launcher, size, [], tmp_path, metrics=False, program=program)
    assert run.returncode == 0, run.output
    got = json.loads(out.read_text())
    assert (got["controller"], got["imported"]) == (controller, imported)
    assert got["fits"].keys() == one_process["fits"].keys()
    for name, fit in got["fits"].items():
        alone = one_process["fits"][name]
        np.testing.assert_allclose(fit["params"], alone["params"], rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(fit["bse"], alone["bse"], rtol=1e-12, err_msg=name)


@pytest.mark.multiprocess
def test_an_exact_run_under_mpirun_reports_mpi4py_and_imports_no_tensorflow(tmp_path):
    """The command line's exact run: the header and the JSON name the collectives, and the
    ranks never import TensorFlow (a rank's sys.modules, printed at exit)."""
    probe = (
        "import sys, atexit\n"
        "from hvd_linreg.cli import main\n"
        "atexit.register(lambda: print('imported:', "
        "[m for m in ('tensorflow', 'horovod.tensorflow') if m in sys.modules], flush=True))\n"
        "sys.exit(main())\n"
    )
    program = (sys.executable, "-c", probe)
    args = ["--model", "poisson", "--solver", "exact", "--num_samples", "3000"]
    run = launch("mpirun", 2, args, tmp_path, program=program)
    assert run.returncode == 0, run.output
    assert run.metrics["controller"] == "mpi4py"
    assert "hvd-linreg: 2 ranks (mpi4py), 3000 samples" in run.stdout
    assert run.stdout.count("imported: []") == 2, run.output


@pytest.mark.multiprocess
def test_a_rank_that_never_comes_ends_an_mpi4py_job_at_the_stall_limit(tmp_path):
    """After a first fit, rank 1 sleeps longer than the test waits for a launch, while rank 0
    waits in its second fit's first collective: MPI would wait for ever; the stall limit ends
    rank 0 with exit 1 and its line, and mpirun the rest (a hang fails the launch's
    timeout)."""
    late = (
        "import os, sys, time, numpy as np, hvd_linreg\n"
        "rank = int(os.environ['OMPI_COMM_WORLD_RANK'])\n"
        "fit = lambda: hvd_linreg.fit(np.ones((4, 1)) * rank, np.arange(4.0), solver='exact')\n"
        "fit()\n"
        "if rank == 1: time.sleep(3600)\n"
        "fit()\n"
    )
    program = (sys.executable, "-c", late)
    env = {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "3"}
    run = launch("mpirun", 2, [], tmp_path, metrics=False, program=program, env=env)
    assert run.returncode != 0, run.output
    assert "[rank 0] a collective waited 3 s: another rank is stuck or dead" in run.stderr
