"""Problems a user causes end every rank with exit code 2 and one clear line, never a hang.

Each case's line is checked in this process (cli.main). The cases that take the paths an error
can take through a job are also launched at 2 ranks under mpirun: a flag refused before Horovod
starts, a problem found by every rank after it (the layout's), one found in one rank's rows (a
Parquet null on rank 1, a CSV cell in one rank's byte range), and one only rank 0 checks (its
output path). tests/test_lines_get_out.py launches such errors 20 times under each launcher."""

from __future__ import annotations

import re
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_error_lines import refused

from conftest import LAUNCH_TIMEOUT_S, launch, launch_each_rank_reporting


def _npz(path, **arrays):
    np.savez(path, **arrays)
    return str(path)


def _text(path, text):
    path.write_text(text)
    return str(path)


def _parquet(path, **columns):
    pq.write_table(pa.table(columns), path)
    return str(path)


def _parts(directory, **texts):
    """Files in directory, named by the keys with . for _ (a_csv: a.csv)."""
    directory.mkdir()
    for name, text in texts.items():
        _text(directory / name.replace("_", "."), text)
    return str(directory)


X3 = np.zeros((10, 2), np.float32)
Y3 = np.zeros(10, np.float32)

# (case, flags or a function of tmp_path giving flags, the message rank 0 must print)
CASES = [
    ("zero steps", ["--num_steps", "0"], "--num_steps must be a positive whole number"),
    ("fractional batch", ["--batch_size", "2.5"], "invalid int value: '2.5'"),
    ("negative samples", ["--num_samples", "-3"], "--num_samples must be a positive"),
    ("zero features", ["--num_features", "0"], "--num_features must be a positive"),
    ("zero log interval", ["--log_every", "0"], "--log_every must be a positive"),
    ("infinite learning rate", ["--learning_rate", "inf"], "--learning_rate must be a finite"),
    ("negative learning rate", ["--learning_rate", "-1"], "--learning_rate must be > 0"),
    ("unknown flag", ["--num_stepz", "5"], "unrecognized arguments: --num_stepz"),
    ("batch larger than shard", ["--batch_size", "600"], "larger than each rank's shard of 500"),
    (
        "fewer samples than ranks",
        ["--num_samples", "1", "--batch_size", "1"],
        "1 samples cannot be split over 2 ranks",
    ),
    ("missing file", lambda t: ["--data", str(t / "nope.npz")], "does not exist"),
    (
        "unknown extension",
        lambda t: ["--data", _text(t / "d.txt", "1,2\n")],
        "unknown data format .txt",
    ),
    ("empty file", lambda t: ["--data", _text(t / "d.csv", "")], "is empty"),
    ("unreadable npz", lambda t: ["--data", _text(t / "d.npz", "not a zip")], "cannot read"),
    ("npz without y", lambda t: ["--data", _npz(t / "d.npz", X=X3)], "missing y"),
    (
        "X and y lengths differ",
        lambda t: ["--data", _npz(t / "d.npz", X=X3, y=Y3[:7])],
        "X has 10 rows but y has 7",
    ),
    (
        "X with 3 dimensions",
        lambda t: ["--data", _npz(t / "d.npz", X=X3.reshape(10, 1, 2), y=Y3)],
        "X must be (rows, features)",
    ),
    (
        "non-numeric cell",
        lambda t: ["--data", _text(t / "d.csv", "a,b\n1,2\n3,x\n5,6\n")],
        "'x' is not a number",
    ),
    (
        "ragged row",
        lambda t: ["--data", _text(t / "d.csv", "a,b\n1,2\n3\n5,6\n")],
        "1 fields, but the header has 2",
    ),
    (
        "unknown target",
        lambda t: ["--data", _text(t / "d.csv", "a,b\n1,2\n3,4\n"), "--target", "price"],
        "'price' is not a column",
    ),
    (
        "NaN in data",
        lambda t: ["--data", _text(t / "d.csv", "a,b\n1,2\n3,nan\n5,6\n7,8\n")],
        "line 3: a missing value ('nan') in column 'b'",
    ),
    (
        "null in the Parquet rows of rank 1",
        lambda t: ["--data", _parquet(t / "d.parquet", x=[1.0, 2, 3, None], y=[1.0, 2, 3, 4])],
        "d.parquet row 3: column 'x' is null",
    ),
    (
        "CSV files whose columns differ",
        lambda t: ["--data", _parts(t / "parts", a_csv="x,y\n1,2\n", b_csv="x,z\n1,2\n")],
        "parts/b.csv has a column 'z' that",
    ),
    ("glob matching nothing", lambda t: ["--data", f"{t}/p-*.parquet"], "matches no file"),
    (
        "unwritable checkpoint dir",
        lambda t: ["--checkpoint_dir", _text(t / "f", "") + "/ckpt"],
        "is not a writable directory",
    ),
    (
        "unwritable metrics path",
        ["--metrics_json", "/nonexistent/dir/m.json"],
        "cannot write --metrics_json",
    ),
]


# The cases launched at 2 ranks (see the module's docstring); the rest need only one.
LAUNCHED = {
    "zero steps",
    "batch larger than shard",
    "fewer samples than ranks",
    "non-numeric cell",
    "null in the Parquet rows of rank 1",
    "unwritable metrics path",
}
TWO_RANKS_ONLY = {"batch larger than shard", "fewer samples than ranks"}  # fine on one rank
BASE = ["--num_steps", "50", "--batch_size", "1"]  # the case's flags win


@pytest.mark.parametrize(
    "case, flags, message",
    [c for c in CASES if c[0] not in TWO_RANKS_ONLY],
    ids=[c[0] for c in CASES if c[0] not in TWO_RANKS_ONLY],
)
def test_usage_error_ends_the_tool_with_exit_code_2(case, flags, message, tmp_path, capsys):
    args = flags(tmp_path) if callable(flags) else flags
    assert message in refused(capsys, [*BASE, *args])


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    "case, flags, message",
    [c for c in CASES if c[0] in LAUNCHED],
    ids=[c[0] for c in CASES if c[0] in LAUNCHED],
)
def test_usage_error_ends_every_rank_with_exit_code_2(case, flags, message, tmp_path):
    args = flags(tmp_path) if callable(flags) else flags
    run = launch("mpirun", 2, [*BASE, *args], tmp_path, timeout=LAUNCH_TIMEOUT_S, metrics=False)
    assert run.returncode == 2, run.output
    errors = [line for line in run.stderr.splitlines() if "hvd-linreg: error:" in line]
    assert len(errors) == 1, run.output  # rank 0 speaks, once
    assert message in errors[0]
    assert "Traceback" not in run.output
    assert "Step:" not in run.stdout  # refused before training


@pytest.mark.multiprocess
def test_problem_only_one_rank_sees_stops_all_ranks(tmp_path):
    """Row 3 belongs to rank 1 of 2: rank 0 reads clean rows, yet both stop together."""
    data = _text(tmp_path / "d.csv", "a,b\n1,2\n3,4\n5,6\n7,inf\n")
    run = launch(
        "horovodrun-gloo",
        2,
        ["--data", data, "--batch_size", "1"],
        tmp_path,
        timeout=LAUNCH_TIMEOUT_S,
        metrics=False,
    )
    errors = [line for line in run.stderr.splitlines() if "hvd-linreg: error:" in line]
    assert len(errors) == 1, run.output
    assert "d.csv line 5: NaN or inf in column 'b'" in errors[0]
    assert errors[0].endswith("(seen on rank 1)")
    assert "Exit code: 2" in run.output  # horovodrun names the ranks' exit code
    assert "]<stderr>:Traceback" not in run.stderr  # no rank printed one (horovodrun may)


@pytest.mark.multiprocess
def test_every_rank_exits_2_before_importing_tensorflow(tmp_path):
    """-X importtime lists every module each rank imports, on its stderr."""
    tool = f"{sys.executable} -X importtime -m hvd_linreg"
    run = launch_each_rank_reporting("mpirun", 2, ["--num_steps", "0"], tmp_path, tool=tool)
    assert run.codes == {0: 2, 1: 2}, run.output
    assert "hvd_linreg.cli" in run.stderr  # importtime did list the imports
    assert not re.search(r"\|\s+tensorflow\s*$", run.stderr, re.M), "a rank imported TensorFlow"


# What each rank's environment holds once the tool has started Horovod, as one line written
# with one write(2): several writes from two ranks interleave under mpirun ("rank 1 rankHOROVOD_"),
# and a line left to the exit's flush was once lost (Horovod's MPI shutdown races it).
_SHOW_ENVIRONMENT = (
    "import os; from hvd_linreg.runtime import ranks; r = ranks.init(); "
    "names = ('HOROVOD_CYCLE_TIME', 'OMPI_MCA_mpi_yield_when_idle', "
    "'HOROVOD_STALL_CHECK_TIME_SECONDS', 'HOROVOD_STALL_SHUTDOWN_TIME_SECONDS'); "
    "line = ' '.join(['rank', str(r.rank), *(f'{k}={os.environ.get(k)}' for k in names)]); "
    "os.write(1, (line + chr(10)).encode())"
)


def _environments(tmp_path, launcher_args=()) -> list[str]:
    program = (sys.executable, "-c", _SHOW_ENVIRONMENT)
    run = launch(
        "mpirun", 2, [], tmp_path, launcher_args=launcher_args, metrics=False, program=program
    )
    assert run.returncode == 0, run.output
    return sorted(line for line in run.stdout.splitlines() if line.startswith("rank "))


@pytest.mark.multiprocess
def test_several_ranks_get_the_documented_environment(tmp_path):
    values = (
        "HOROVOD_CYCLE_TIME=0 OMPI_MCA_mpi_yield_when_idle=1 "
        "HOROVOD_STALL_CHECK_TIME_SECONDS=30 HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=120"
    )
    assert _environments(tmp_path) == [f"rank 0 {values}", f"rank 1 {values}"]


@pytest.mark.multiprocess
def test_your_environment_wins_on_every_rank(tmp_path):
    yours = ("HOROVOD_CYCLE_TIME=5", "OMPI_MCA_mpi_yield_when_idle=0")
    yours += ("HOROVOD_STALL_CHECK_TIME_SECONDS=7", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=9")
    flags = tuple(f for pair in yours for f in ("-x", pair))
    assert _environments(tmp_path, flags) == [f"rank {r} {' '.join(yours)}" for r in (0, 1)]
