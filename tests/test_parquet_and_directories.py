"""Parquet files, and directories or globs of files, are one dataset: the same rows train the
same way as one .npy holding them; a rank reads only the row groups holding its rows; --target
and --features choose columns by name; bad input ends every rank with one line and exit 2."""

from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import launch, params_of, read_metrics
from hvd_linreg.cli import main
from hvd_linreg.config import Config
from hvd_linreg.data import csv_split_texts, load_shard
from hvd_linreg.errors import UsageError
from reference import averaged_sgd, lstsq

NAMES = ["a", "b", "c", "y"]


def regression(num_rows: int, seed: int = 4) -> np.ndarray:
    """float64 rows of features a, b, c and target y."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((num_rows, 3)) * [1.0, 10.0, 0.1] + [0.0, 50.0, 1.0]
    y = X @ [0.5, -0.1, 3.0] + 1.0 + 0.1 * rng.standard_normal(num_rows)
    return np.c_[X, y]


def write_parquet(path, rows: np.ndarray, row_group_size: int, names=NAMES) -> str:
    table = pa.table({name: rows[:, j] for j, name in enumerate(names)})
    pq.write_table(table, path, row_group_size=row_group_size)
    return str(path)


def write_csv(path, rows: np.ndarray, names=NAMES) -> str:
    lines = [",".join(names)] + [",".join(repr(float(v)) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def write_parts(directory, rows: np.ndarray, suffix: str, cuts=(0, 170, 170, 171, None)) -> str:
    """rows cut into parts (one of them empty), written as part-0, part-1, ... in directory."""
    directory.mkdir()
    for k, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:])):
        path = directory / f"part-{k}{suffix}"
        if suffix == ".npy":
            np.save(path, rows[lo:hi])
        elif suffix == ".parquet":
            write_parquet(path, rows[lo:hi], 64)
        else:
            write_csv(path, rows[lo:hi])
    return str(directory)


def _shard(data, rank=0, size=1, batch_size=7, **flags):
    return load_shard(Config(data=str(data), batch_size=batch_size, **flags), rank, size)


@pytest.fixture(scope="module")
def rows():
    return regression(1000)


@pytest.fixture(scope="module")
def npy_file(rows, tmp_path_factory):
    path = tmp_path_factory.mktemp("npy") / "d.npy"
    np.save(path, rows)
    return path


def _layout_rows(shard, rows: np.ndarray) -> np.ndarray:
    """The rows of the global table the shard's layout says it holds, in its order."""
    return rows[shard.layout.rows()]


@pytest.mark.parametrize("size", [1, 2, 3])
def test_a_parquet_file_gives_each_rank_the_rows_of_its_layout(rows, npy_file, tmp_path, size):
    """Row groups of 64 rows: runs of 7 rows (whole batches, as Parquet's are on several ranks)
    start and end inside them and cross them. On one rank: the same shard as the .npy's."""
    path = write_parquet(tmp_path / "d.parquet", rows, 64)
    for rank in range(size):
        shard = _shard(path, rank, size)
        assert shard.dtype == "float64" and shard.feature_names == ("a", "b", "c")
        assert shard.layout.run_length == (7 if size > 1 else 1)
        np.testing.assert_array_equal(shard.X, _layout_rows(shard, rows)[:, :-1])
        np.testing.assert_array_equal(shard.y, _layout_rows(shard, rows)[:, -1])
        if size == 1:
            np.testing.assert_array_equal(shard.X, _shard(npy_file).X)


@pytest.mark.parametrize("suffix", [".npy", ".parquet", ".csv"])
def test_a_directory_or_glob_reads_as_one_file_with_the_same_rows(rows, npy_file, tmp_path, suffix):
    directory = write_parts(tmp_path / "parts", rows, suffix)
    sizes = [1] if suffix == ".csv" else [1, 2, 3]  # CSV's several ranks need a job: below
    for data in (directory, f"{directory}/part-*{suffix}"):
        for size in sizes:
            for rank in range(size):
                shard = _shard(data, rank, size)
                expected = _layout_rows(shard, rows)
                np.testing.assert_allclose(shard.X, expected[:, :-1], rtol=1e-15)
                np.testing.assert_allclose(shard.y, expected[:, -1], rtol=1e-15)


def test_files_are_read_in_the_order_of_their_paths(tmp_path):
    (tmp_path / "parts").mkdir()
    for name, value in (("b.npy", 2.0), ("a.npy", 1.0), ("c.npy", 3.0), ("_SUCCESS.npy", 9.0)):
        np.save(tmp_path / "parts" / name, np.full((2, 2), value))
    shard = _shard(tmp_path / "parts", batch_size=1)
    np.testing.assert_array_equal(shard.y, [1, 1, 2, 2, 3, 3])  # _SUCCESS skipped


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_csv_files_are_cut_into_byte_ranges_as_one_file(tmp_path, size):
    """The ranks' lines are the files' data lines, each once, in order, whatever file a
    rank's byte range starts or ends in (the last file ends without a line break)."""
    lines = [f"{i},{i * 0.5:.{i % 7}f}\n" for i in range(300)]
    files = []
    for k, (lo, hi) in enumerate([(0, 40), (40, 40), (40, 41), (41, 300)]):
        path = tmp_path / f"{k}.csv"
        path.write_text("a,b\n" + "".join(lines[lo:hi]).rstrip("\n" if k == 3 else ""))
        files.append((path, 4))
    per_file = [""] * len(files)
    for rank in range(size):
        for i, text in csv_split_texts(files, rank, size):
            per_file[i] += text
    assert per_file == ["".join(lines[:40]), "", lines[40], "".join(lines[41:]).rstrip("\n")]


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_features_choose_and_order_the_columns(rows, tmp_path, suffix):
    """--features c,a --target b: X is columns c and a, in that order, y is b; the exact
    solution is lstsq's on those columns."""
    write = write_parquet if suffix == ".parquet" else write_csv
    path = write(tmp_path / f"d{suffix}", rows, *([64] if suffix == ".parquet" else []))
    shard = _shard(path, features="c,a", target="b")
    assert shard.feature_names == ("c", "a")
    np.testing.assert_allclose(shard.X, _layout_rows(shard, rows)[:, [2, 0]], rtol=1e-15)
    np.testing.assert_allclose(shard.y, _layout_rows(shard, rows)[:, 1], rtol=1e-15)
    out = tmp_path / "m.json"
    args = ["--data", path, "--features", "c,a", "--target", "b", "--solver", "exact"]
    assert main([*args, "--metrics_json", str(out)]) == 0
    m = read_metrics(out)
    assert m["features"] == ["c", "a"]
    np.testing.assert_allclose(params_of(m), lstsq(rows[:, [2, 0]], rows[:, 1]), rtol=1e-9)


def test_a_parquet_shard_larger_than_the_rank_s_memory_is_read_as_used(rows, tmp_path, monkeypatch):
    path = write_parquet(tmp_path / "d.parquet", rows, 64)
    in_memory = _shard(path, 1, 2, batch_size=10)
    monkeypatch.setenv("HVD_LINREG_RANK_MEMORY", "1000")
    streamed = _shard(path, 1, 2, batch_size=10)
    assert in_memory.table is None and streamed.table is not None
    blocks = list(streamed.blocks(max_rows=40))
    assert len(blocks) > 2
    np.testing.assert_array_equal(np.concatenate([b.X for b in blocks]), in_memory.X)
    np.testing.assert_array_equal(np.concatenate([b.y for b in blocks]), in_memory.y)


def test_columns_left_out_are_not_read_so_they_may_hold_anything(tmp_path):
    path = _parquet(tmp_path / "d.parquet", note=["a", None, "c"], x=[1.0, 2, 3], y=[2.0, 4, 6])
    shard = _shard(path, batch_size=1, features="x")
    np.testing.assert_array_equal(shard.X[:, 0], [1, 2, 3])
    np.testing.assert_array_equal(shard.y, [2, 4, 6])


def test_without_pyarrow_reading_parquet_says_how_to_install_it(tmp_path, monkeypatch):
    path = _parquet(tmp_path / "d.parquet", x=[1.0, 2, 3], y=[2.0, 4, 6])
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(UsageError, match="reading Parquet needs pyarrow: pip install pyarrow"):
        _shard(path, batch_size=1)


def _rchar() -> int:
    """Bytes this process has read through read() calls so far (pyarrow's too)."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def test_each_rank_reads_only_the_row_groups_holding_its_rows(tmp_path):
    """8 row groups of 8192 rows = B: at 2 ranks each rank's runs are 4 whole row groups,
    which it reads alone; so about half the file."""
    table = regression(8 * 8192, seed=9)
    path = write_parquet(tmp_path / "d.parquet", table, 8192)
    size = (tmp_path / "d.parquet").stat().st_size
    footer = 64 << 10  # pyarrow reads the file's last 64 KB to find its footer
    for rank in range(2):
        before = _rchar()
        shard = _shard(path, rank, 2, batch_size=8192)
        read = _rchar() - before
        ids = np.concatenate([np.arange(8192) + 8192 * (2 * c + rank) for c in range(4)])
        np.testing.assert_array_equal(shard.y, table[ids, -1])
        reading_proc_io = 256
        assert read <= size / 2 + footer + reading_proc_io, (read, size)


@pytest.fixture(scope="module")
def large_groups(tmp_path_factory):
    """Two row groups of 262144 rows, 8 MB each as read (4 float64 columns)."""
    path = tmp_path_factory.mktemp("groups") / "d.parquet"
    return write_parquet(path, regression(2 * 262144, seed=5), 262144)


def test_row_groups_larger_than_a_batch_are_noted_only_where_they_cost(large_groups, tmp_path):
    assert _shard(large_groups, 0, 2, batch_size=50).oversized_reads == 262144
    assert _shard(large_groups, 1, 2, batch_size=50).oversized_reads == 262144
    assert _shard(large_groups, 0, 1, batch_size=50).oversized_reads == 0  # one rank reads all
    assert _shard(large_groups, 0, 2, batch_size=262144).oversized_reads == 0  # groups = batch
    small = write_parquet(tmp_path / "small.parquet", regression(1000), 500)
    assert _shard(small, 0, 2, batch_size=50).oversized_reads == 0  # 16 KB groups: no matter


@pytest.mark.multiprocess
def test_rank_0_says_once_how_to_write_row_groups_no_larger_than_the_batch(large_groups, tmp_path):
    run = launch("mpirun", 2, ["--data", large_groups, "--num_steps", "5"], tmp_path)
    assert run.returncode == 0, run.output
    expected = (
        f"warning: {large_groups} has row groups of up to 262144 rows, more than a batch of "
        "100: each rank reads and decodes every row group that holds any of its rows"
    )
    assert run.output.count(expected) == 1, run.output
    assert "row_group_size=100)" in run.output


# --- Bad input: one line naming the file and the column, exit code 2, before training ------


def _parquet(path, **columns):
    pq.write_table(pa.table(columns), path)
    return str(path)


def _empty():
    return pa.array([], pa.float64())


def _two_parquets(t, second: dict) -> str:
    (t / "parts").mkdir()
    _parquet(t / "parts" / "a.parquet", x=[1.0, 2.0], y=[3.0, 4.0])
    _parquet(t / "parts" / "b.parquet", **second)
    return str(t / "parts")


def _text(path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _files(directory, **texts) -> str:
    directory.mkdir()
    for name, text in texts.items():
        (directory / name.replace("_", ".")).write_text(text)
    return str(directory)


GOOD = {"x": [1.0, 2.0, 3.0], "y": [2.0, 4.0, 6.0]}

# (case, flags from tmp_path, what rank 0's one line must say)
BAD_INPUT = [
    (
        "parquet: --target not a column",
        lambda t: ["--data", _parquet(t / "d.parquet", **GOOD), "--target", "price"],
        "--target 'price' is not a column of {t}/d.parquet; columns: x, y",
    ),
    (
        "parquet: --features not a column",
        lambda t: ["--data", _parquet(t / "d.parquet", **GOOD), "--features", "x,z"],
        "--features 'z' is not a column of {t}/d.parquet",
    ),
    (
        "parquet: --features holds the target",
        lambda t: ["--data", _parquet(t / "d.parquet", **GOOD), "--features", "x,y"],
        "--features names 'y', the target column of {t}/d.parquet",
    ),
    (
        "parquet: non-numeric target",  # a feature of words is categorical
        lambda t: ["--data", _parquet(t / "d.parquet", x=[1.0, 2.0, 3.0], s=["a", "b", "c"])],
        "the target 's' holds words ('a', 'b', 'c'): --model linear needs numbers",
    ),
    (
        "parquet: null",
        lambda t: ["--data", _parquet(t / "d.parquet", x=[1.0, None, 3.0], y=[1.0, 2.0, 3.0])],
        "{t}/d.parquet row 1: column 'x' is null",
    ),
    (
        "parquet: NaN",
        lambda t: ["--data", _parquet(t / "d.parquet", x=[1.0, 2.0, 3.0], y=[1.0, 2.0, np.inf])],
        "{t}/d.parquet row 2: NaN or inf in column 'y'",
    ),
    (
        "parquet: no rows",
        lambda t: ["--data", _parquet(t / "d.parquet", x=_empty(), y=_empty())],
        "{t}/d.parquet holds no rows",
    ),
    (
        "not a parquet file",
        lambda t: ["--data", _text(t / "d.parquet", "a,b\n1,2\n")],
        "{t}/d.parquet is not a Parquet file",
    ),
    (
        "--features on a .npy",
        lambda t: ["--data", _npy(t / "d.npy", (4, 2)), "--features", "a"],
        "--features names columns of a CSV or Parquet file; it does not apply to .npy",
    ),
    (
        "--features with a column twice",
        lambda t: ["--data", _parquet(t / "d.parquet", **GOOD), "--features", "x,x"],
        "--features takes distinct column names separated by commas, got 'x,x'",
    ),
    (
        "parquet files: another column name",
        lambda t: ["--data", _two_parquets(t, {"z": [1.0], "y": [2.0]})],
        "{t}/parts/b.parquet has a column 'z' that {t}/parts/a.parquet has not",
    ),
    (
        "parquet files: a column fewer",
        lambda t: ["--data", _two_parquets(t, {"y": [2.0]})],
        "{t}/parts/b.parquet has no column 'x'",
    ),
    (
        "parquet files: another type",
        lambda t: ["--data", _two_parquets(t, {"x": [1], "y": [2.0]})],
        "{t}/parts/b.parquet: column 'x' is int64, but double in {t}/parts/a.parquet",
    ),
    (
        "parquet files: null in the second",
        lambda t: ["--data", _two_parquets(t, {"x": [1.0, 2.0], "y": [None, 2.0]})],
        "{t}/parts/b.parquet row 0: column 'y' is null",
    ),
    (
        "npy files: another number of columns",
        lambda t: ["--data", _npys(t, (4, 3), (4, 2))],
        "{t}/parts/b.npy holds 2 columns of float64, but {t}/parts/a.npy 3 of float64",
    ),
    (
        "csv files: another column",
        lambda t: ["--data", _files(t / "parts", a_csv="x,y\n1,2\n", b_csv="x,z\n1,2\n")],
        "{t}/parts/b.csv has a column 'z' that {t}/parts/a.csv has not",
    ),
    (
        "csv files: not a number in the second",
        lambda t: ["--data", _files(t / "parts", a_csv="x,y\n1,2\n", b_csv="x,y\n1,2\n3,q\n")],
        "{t}/parts/b.csv line 3: 'q' is not a number (column 'y')",
    ),
    (
        "csv files: NaN in the second",
        lambda t: ["--data", _files(t / "parts", a_csv="x,y\n1,2\n", b_csv="x,y\n1,2\nnan,3\n")],
        "{t}/parts/b.csv line 3: a missing value ('nan') in column 'x'; fill it, or drop such rows "
        "with --missing drop",
    ),
    (
        "empty directory",
        lambda t: ["--data", _files(t / "parts", _SUCCESS="")],
        "data directory {t}/parts holds no data files",
    ),
    (
        "glob matching nothing",
        lambda t: ["--data", f"{t}/parts-*.parquet"],
        "--data {t}/parts-*.parquet matches no file",
    ),
    (
        "mixed formats",
        lambda t: ["--data", _files(t / "parts", a_csv="x,y\n1,2\n", b_parquet="")],
        "mixes formats ({t}/parts/a.csv, {t}/parts/b.parquet)",
    ),
    (
        "a sub-directory",
        lambda t: ["--data", _with_subdirectory(t / "parts")],
        "{t}/parts/x is not a file",
    ),
]


def _npy(path, shape) -> str:
    np.save(path, np.ones(shape))
    return str(path)


def _npys(t, *shapes) -> str:
    (t / "parts").mkdir()
    for name, shape in zip("ab", shapes):
        _npy(t / "parts" / f"{name}.npy", shape)
    return str(t / "parts")


def _with_subdirectory(directory) -> str:
    _files(directory, a_csv="x,y\n1,2\n")
    (directory / "x").mkdir()
    return str(directory)


@pytest.mark.parametrize("case, flags, message", BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_is_one_line_naming_file_and_column_and_exit_2(
    case, flags, message, tmp_path, capsys
):
    args = flags(tmp_path)
    assert main(["--num_steps", "5", "--batch_size", "1", *args]) == 2
    out = capsys.readouterr()
    errors = [line for line in out.err.splitlines() if "hvd-linreg: error:" in line]
    assert len(errors) == 1, out.err
    assert message.format(t=tmp_path) in errors[0]
    assert "Traceback" not in out.err and "Step:" not in out.out


# --- Whole runs, on several ranks ------------------------------------------------------------

STEPS, LR, BATCH = 60, 0.002, 50
SGD_FLAGS = ["--num_steps", str(STEPS), "--learning_rate", str(LR), "--batch_size", str(BATCH)]


def _reference(table: np.ndarray, m: dict) -> np.ndarray:
    return averaged_sgd(
        table[:, :-1],
        table[:, -1],
        ranks=m["size"],
        batch_size=BATCH,
        steps=STEPS,
        lr=LR,
        w0=m["initial_w"],
        b0=m["initial_b"],
    )


def test_parquet_sgd_and_exact_on_one_rank_match_the_float64_references(rows, tmp_path):
    path = write_parquet(tmp_path / "d.parquet", rows, 64)
    for solver in ("sgd", "exact"):
        out = tmp_path / f"{solver}.json"
        assert (
            main(["--data", path, *SGD_FLAGS, "--solver", solver, "--metrics_json", str(out)]) == 0
        )
        m = read_metrics(out)
        assert m["dtype"] == "float64" and m["features"] == ["a", "b", "c"]
        expected = _reference(rows, m) if solver == "sgd" else lstsq(rows[:, :-1], rows[:, -1])
        np.testing.assert_allclose(params_of(m), expected, rtol=1e-9)


@pytest.mark.multiprocess
@pytest.mark.parametrize("layout", ["file", "parquet parts", "csv parts"])
def test_parquet_and_directories_on_two_ranks_match_the_float64_references(rows, tmp_path, layout):
    if layout == "file":
        data = write_parquet(tmp_path / "d.parquet", rows, 64)
    else:
        data = write_parts(tmp_path / "parts", rows, ".parquet" if "parquet" in layout else ".csv")
    sgd = launch("mpirun", 2, ["--data", data, *SGD_FLAGS], tmp_path)
    assert sgd.returncode == 0, sgd.output
    np.testing.assert_allclose(params_of(sgd.metrics), _reference(rows, sgd.metrics), rtol=1e-9)
    if layout == "file":
        exact = launch("mpirun", 2, ["--data", data, "--solver", "exact"], tmp_path)
        assert exact.returncode == 0, exact.output
        np.testing.assert_allclose(
            params_of(exact.metrics), lstsq(rows[:, :-1], rows[:, -1]), rtol=1e-9
        )
