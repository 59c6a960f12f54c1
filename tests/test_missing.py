"""Missing values in a CSV file (--missing): by default the first one stops the run naming its
file, line and column; with --missing drop every row with one in a column the run uses is
dropped, the same rows at any rank count, and the fit is statsmodels' with missing="drop"."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from conftest import launch, params_of, read_metrics
from hvd_linreg.cli import main

MISSING = ["", "NA", "N/A", "NaN", "nan", "null", "NULL", " NA "]


@pytest.fixture(scope="module")
def holes(tmp_path_factory):
    """300 rows of x1, x2, y (and an unused id column of words, some empty), with a missing
    value in every 7th row (in turn x1, x2, y, spelled each way), so that rank boundaries
    at 2 and 3 ranks fall among them; and the same as float64 arrays, NaN where missing."""
    rng = np.random.default_rng(11)
    n = 300
    X = rng.standard_normal((n, 2))
    y = X @ [1.5, -0.7] + 0.3 + 0.2 * rng.standard_normal(n)
    table = np.c_[X, y]
    cells = [[repr(float(v)) for v in row] for row in table]
    for k, i in enumerate(range(3, n, 7)):
        j = k % 3
        cells[i][j] = MISSING[k % len(MISSING)]
        table[i, j] = np.nan
    path = tmp_path_factory.mktemp("missing") / "holes.csv"
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["id", "x1", "x2", "y"])
        for i, row in enumerate(cells):
            out.writerow(["" if i % 5 == 0 else f"firm {i}", *row])
    return path, table


def statsmodels_ols(table):
    import statsmodels.api as sm

    X, y = table[:, :2], table[:, 2]
    return sm.OLS(y, sm.add_constant(X, prepend=False), missing="drop").fit()


def coefficients(metrics, key):
    return np.array([c[key] for c in metrics["statistics"]["coefficients"]])


def fit_args(path):
    return ["--data", str(path), "--features", "x1,x2", "--solver", "exact"]


def test_drop_is_statsmodels_missing_drop(holes, tmp_path, capsys):
    path, table = holes
    dropped = int(np.isnan(table).any(axis=1).sum())
    out = tmp_path / "m.json"
    args = [*fit_args(path), "--missing", "drop", "--metrics_json", str(out)]
    assert main(args) == 0
    m = read_metrics(out)
    ref = statsmodels_ols(table)
    np.testing.assert_allclose(params_of(m), ref.params, rtol=1e-10)
    np.testing.assert_allclose(coefficients(m, "std_error"), ref.bse, rtol=1e-8)
    assert (m["num_samples"], m["rows_dropped_missing"]) == (ref.nobs, dropped) == (257, 43)
    header = capsys.readouterr().out.splitlines()[0]
    assert "257 samples x 2 features (float64) from " in header
    assert "holes.csv (43 with a missing value dropped), " in header


def test_poisson_drop_is_statsmodels_glm_missing_drop(holes, tmp_path):
    import statsmodels.api as sm

    path, table = holes
    counts = table.copy()
    rng = np.random.default_rng(3)
    counts[:, 2] = np.where(np.isnan(counts[:, 2]), np.nan, rng.poisson(3.0, len(counts)))
    text = path.read_text().splitlines()
    with open(tmp_path / "counts.csv", "w") as f:  # the same holes, a count as the target
        f.write(text[0] + "\n")
        for line, row in zip(text[1:], counts):
            cells = line.split(",")
            if not np.isnan(row[2]):
                cells[3] = str(int(row[2]))
            f.write(",".join(cells) + "\n")
    out = tmp_path / "m.json"
    args = [*fit_args(tmp_path / "counts.csv"), "--model", "poisson", "--missing", "drop"]
    assert main([*args, "--metrics_json", str(out)]) == 0
    m = read_metrics(out)
    X = sm.add_constant(counts[:, :2], prepend=False)
    ref = sm.GLM(counts[:, 2], X, family=sm.families.Poisson(), missing="drop").fit(tol=1e-13)
    np.testing.assert_allclose(params_of(m), ref.params, rtol=1e-8)
    np.testing.assert_allclose(coefficients(m, "std_error"), ref.bse, rtol=1e-8)
    assert m["statistics"]["deviance"] == pytest.approx(ref.deviance, rel=1e-10)


@pytest.mark.multiprocess
@pytest.mark.parametrize("size", [2, 3])
def test_every_rank_count_drops_the_same_rows(holes, tmp_path, size):
    path, table = holes
    run = launch("mpirun", size, [*fit_args(path), "--missing", "drop"], tmp_path)
    assert run.returncode == 0, run.output
    m = run.metrics
    np.testing.assert_allclose(params_of(m), statsmodels_ols(table).params, rtol=1e-10)
    assert (m["num_samples"], m["rows_dropped_missing"]) == (257, 43)
    assert "(43 with a missing value dropped)" in run.stdout.splitlines()[0]


@pytest.fixture(scope="module")
def holes_parquet(holes):
    """The same rows with a word column g as Parquet files, row groups of 40: x1's holes NaN,
    x2's, y's and some of g's nulls, and a level of g ('z') only in a row dropped for x1; and
    the same rows as CSV. Two files, so that rows are named across them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path, table = holes
    n = len(table)
    g = np.array(["a", "b", "c"], object)[np.arange(n) % 3]
    g[[10, 100, 200]] = None
    g[3] = "z"  # row 3's x1 is missing
    folder = path.parent / "holes_parquet"
    folder.mkdir()
    for name, rows in (("part-0.parquet", slice(0, 130)), ("part-1.parquet", slice(130, n))):
        columns = {
            "x1": pa.array(table[rows, 0], from_pandas=False),  # NaN stays NaN
            "x2": pa.array(table[rows, 1], from_pandas=True),  # NaN becomes null
            "g": pa.array(g[rows].tolist(), pa.string()),
            "y": pa.array(table[rows, 2], from_pandas=True),
        }
        pq.write_table(pa.table(columns), folder / name, row_group_size=40)
    csv_path = path.parent / "holes_g.csv"
    with open(csv_path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["x1", "x2", "g", "y"])
        for row, level in zip(table, g):
            out.writerow([*("" if np.isnan(v) else repr(float(v)) for v in row[:2]), level or "",
                          "" if np.isnan(row[2]) else repr(float(row[2]))])  # fmt: skip
    frame = {"x1": table[:, 0], "x2": table[:, 1], "g": g, "y": table[:, 2]}
    return folder, csv_path, frame


def test_parquet_drop_is_csv_drop_and_statsmodels_on_the_rows_kept(holes_parquet, tmp_path):
    import pandas as pd
    import statsmodels.formula.api as smf

    folder, csv_path, frame = holes_parquet
    args = ["--features", "x1,x2,g", "--solver", "exact", "--missing", "drop"]
    runs = {}
    for name, data in (("parquet", folder), ("csv", csv_path)):
        out = tmp_path / f"{name}.json"
        assert main(["--data", str(data), *args, "--metrics_json", str(out), "--quiet"]) == 0
        runs[name] = read_metrics(out)
    ours, theirs = runs["parquet"], runs["csv"]
    assert ours["features"] == theirs["features"] == ["x1", "x2", "g[T.b]", "g[T.c]"]
    assert ours["rows_dropped_missing"] == theirs["rows_dropped_missing"] == 45
    np.testing.assert_allclose(params_of(ours), params_of(theirs), rtol=1e-12)
    ref = smf.ols("y ~ x1 + x2 + g", pd.DataFrame(frame).dropna()).fit()
    assert ours["num_samples"] == ref.nobs == 255
    ordered = [ref.params[n] for n in ["x1", "x2", "g[T.b]", "g[T.c]", "Intercept"]]
    np.testing.assert_allclose(params_of(ours), ordered, rtol=1e-10)


@pytest.mark.multiprocess
def test_parquet_drop_is_the_same_on_three_ranks(holes_parquet, tmp_path):
    folder, _, _ = holes_parquet
    one = tmp_path / "one.json"
    args = ["--data", str(folder), "--features", "x1,x2,g", "--solver", "exact"]
    assert main([*args, "--missing", "drop", "--metrics_json", str(one), "--quiet"]) == 0
    run = launch("mpirun", 3, [*args, "--missing", "drop"], tmp_path)
    assert run.returncode == 0, run.output
    assert run.metrics["features"] == read_metrics(one)["features"]
    assert (run.metrics["num_samples"], run.metrics["rows_dropped_missing"]) == (255, 45)
    np.testing.assert_allclose(params_of(run.metrics), params_of(read_metrics(one)), rtol=1e-10)
    assert "(45 with a missing value dropped)" in run.stdout.splitlines()[0]


def test_a_parquet_row_is_named_in_its_file_after_drops(tmp_path, capsys):
    """Rows with a null drop; the negative target of the second file's row 2 is named as the
    files' row 5, named as b.parquet's row 2."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "parts").mkdir()
    pq.write_table(
        pa.table({"x": [1.0, None, 3.0], "y": [2.0, 1.0, None]}), tmp_path / "parts/a.parquet"
    )
    pq.write_table(
        pa.table({"x": [None, 5.0, 6.0], "y": [1.0, 2.0, -1.0]}), tmp_path / "parts/b.parquet"
    )
    args = ["--data", str(tmp_path / "parts"), "--model", "poisson", "--solver", "exact"]
    assert main([*args, "--missing", "drop"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}/parts/b.parquet row 2: the target is -1" in err
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}/parts/a.parquet row 1: column 'x' is null; fill it" in err


@pytest.mark.parametrize("cell", MISSING)
def test_a_missing_value_stops_the_run_naming_its_line_and_column(cell, tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text(f"x,note,y\n1,a,2\n2,,3\n3,c,{cell}\n4,d,5\n")
    code = main(["--data", str(path), "--features", "x", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.strip() == (
        f"hvd-linreg: error: {path} line 4: a missing value ({cell!r}) in column 'y'; "
        "fill it, or drop such rows with --missing drop"
    )


def test_a_missing_value_before_a_word_is_the_first_problem(tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text("x,y\n1,2\n,3\n3,4\nthree,5\n")
    assert main(["--data", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{path} line 3: a missing value ('') in column 'x'" in err


def test_a_later_problem_names_the_files_own_row_after_drops(tmp_path, capsys):
    """Rows 1 and 2 are dropped; the negative target of the file's row 4 is named as row 4."""
    path = tmp_path / "d.csv"
    path.write_text("x,y\n1,2\n2,NA\n,3\n4,5\n5,-1\n6,2\n")
    args = ["--data", str(path), "--model", "poisson", "--solver", "exact", "--missing", "drop"]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{path} line 6: the target is -1; --model poisson needs y >= 0" in err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--missing", "drop"], "--missing drop is for the rows of --data"),
        (["--missing", "keep"], "argument --missing: invalid choice: 'keep'"),
    ],
)
def test_a_missing_setting_that_cannot_apply_is_refused(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_drop_refuses_formats_it_does_not_drop_from(tmp_path, capsys):
    np.savez(tmp_path / "d.npz", X=np.ones((4, 1)), y=np.ones(4))
    assert main(["--data", str(tmp_path / "d.npz"), "--missing", "drop"]) == 2
    err = capsys.readouterr().err
    assert "--missing drop drops the rows of CSV and Parquet files; a .npz file's NaNs" in err


def test_drop_of_every_row_is_refused(tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text("x,y\n1,\nNA,2\n")
    assert main(["--data", str(path), "--missing", "drop"]) == 2
    err = capsys.readouterr().err
    assert "every row of" in err and "--missing drop leaves none" in err


def test_the_metrics_say_none_were_dropped_by_default(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("x,y\n1,2\n2,3\n3,5\n")
    out = tmp_path / "m.json"
    assert main(["--data", str(path), "--solver", "exact", "--metrics_json", str(out)]) == 0
    assert json.loads(out.read_text())["rows_dropped_missing"] == 0
