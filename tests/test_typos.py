"""A typo is not a category (docs/data.md, categorical columns): a column of numbers with a word
in it ends the run on every rank with exit code 2 and one line naming the file, the word's
true line, the column and the word, wherever the word is and whichever rank parses it; an ID
column is not a category; and real word columns, or numbers named in --categorical, are still
levels."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from conftest import ERROR, launch, launch_each_rank_reporting, read_metrics, refused
from hvd_linreg.cli import main

REMEDY = "fix the cell, or name the column in --categorical to read each of its values as a level"


def numbers_with_a_word(path, rows: int, line: int, word: str = "oops"):
    """A CSV file of columns a, b and y, rows long, whose column b holds numbers but for
    `word` on the file's line `line` (the header is line 1). Returns the path."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(rows), rng.standard_normal(rows)
    y = 1 + 2 * a - b + 0.1 * rng.standard_normal(rows)
    cells = [f"{v!r}" for v in b.tolist()]
    cells[line - 2] = word
    path.write_text(
        "a,b,y\n" + "".join(f"{p!r},{q},{t!r}\n" for p, q, t in zip(a.tolist(), cells, y.tolist()))
    )
    return path


def the_error(path, line: int, word: str = "oops") -> re.Pattern:
    return re.compile(
        re.escape(f"{ERROR}{path} line {line}: {word!r} in column 'b' is not a number, but ")
        + r"the column holds numbers \('[-0-9.e]+' among them\); "
        + re.escape(REMEDY)
    )


@pytest.mark.parametrize(
    "line, word",
    [(203, "oops"), (2, "oops"), (401, "1.3O")],
    ids=["middle", "first cell", "last cell, a letter O"],
)
def test_a_word_in_a_column_of_numbers_is_refused_naming_its_line(tmp_path, capsys, line, word):
    path = numbers_with_a_word(tmp_path / "cell.csv", 400, line, word)
    said = refused(capsys, ["--data", str(path)])
    assert the_error(path, line, word).fullmatch(ERROR + said), said
    # the exact solver too: it reads the same rows
    assert refused(capsys, ["--data", str(path), "--solver", "exact"]) == said


def test_a_word_past_the_first_64_kb_is_refused_by_either_parser(tmp_path, capsys, monkeypatch):
    """pyarrow reads the first 64 KB to find columns of words; a later word is found as its
    float parser refuses it. The tool's own parser gives the same line."""
    from hvd_linreg.data import csv_parse as csv_reader

    path = numbers_with_a_word(tmp_path / "late.csv", 5000, 4500)
    assert path.stat().st_size > 3 * 65536
    said = refused(capsys, ["--data", str(path), "--solver", "exact"])
    assert the_error(path, 4500).fullmatch(ERROR + said), said
    monkeypatch.setattr(csv_reader, "parse_split", lambda *args: None)
    assert refused(capsys, ["--data", str(path), "--solver", "exact"]) == said


def test_a_word_after_rows_dropped_names_its_line_in_the_file(tmp_path, capsys):
    path = numbers_with_a_word(tmp_path / "holes.csv", 400, 300)
    lines = path.read_text().splitlines()
    for k in (10, 100, 250):  # a missing value in column a: those rows drop
        lines[k] = "NA," + lines[k].split(",", 1)[1]
    path.write_text("\n".join(lines) + "\n")
    said = refused(capsys, ["--data", str(path), "--missing", "drop"])
    assert the_error(path, 300).fullmatch(ERROR + said), said


@pytest.mark.multiprocess
@pytest.mark.parametrize("launcher", ["mpirun", "horovodrun-gloo"])
@pytest.mark.parametrize("solver", ["sgd", "exact"])
@pytest.mark.parametrize("size", [2, 4])
@pytest.mark.parametrize("line", [2, 3900], ids=["first cell", "a line rank 0 does not hold"])
def test_every_rank_stops_with_the_same_line(tmp_path, launcher, solver, size, line):
    """At any rank count the word's true line is named, once, by rank 0; every rank exits 2,
    before anything is trained, whichever collectives the run makes (an exact run's under
    mpirun are mpi4py's). Line 3900 of 4000 is parsed by the last rank; line 2 by rank 0,
    while the other ranks see only numbers."""
    path = numbers_with_a_word(tmp_path / "cell.csv", 4000, line)
    args = ["--data", str(path), "--solver", solver]
    run = launch_each_rank_reporting(launcher, size, args, tmp_path)
    assert run.codes == dict.fromkeys(range(size), 2), run.output
    errors = [x for x in run.stderr.splitlines() if ERROR in x]
    assert len(errors) == 1, run.output
    assert the_error(path, line).search(errors[0]), errors[0]
    assert "Traceback" not in run.output and "Step:" not in run.output


def notes_over_lines(path, bad: str) -> tuple[int, str]:
    """A CSV file of 400 rows (a, b, a note the run passes over, y) whose notes are quoted and
    span 2 or 3 lines in two rows of three; 20 rows before the end, in a row of one line, bad
    replaces column b's cell ("oops") or adds a fifth field ("extra"). Returns that row's
    line in the file (the header is line 1) and the file's text."""
    rng = np.random.default_rng(4)
    lines = ["a,b,note,y"]
    for i in range(400):
        note = "plain" if i % 3 == 2 or i == 380 else ['"two\nlines, a,"', '"3\n\nlines"'][i % 3]
        cells = [f"{v:.6f}" for v in rng.standard_normal(3)]
        if i == 380:
            line = sum(part.count("\n") + 1 for part in lines) + 1
            cells[1] = "oops" if bad == "word" else cells[1]
            cells[2] += ",extra" if bad == "fields" else ""
        lines.append(f"{cells[0]},{cells[1]},{note},{cells[2]}")
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return line, text


@pytest.mark.parametrize(
    "size", [1, pytest.param(2, marks=pytest.mark.multiprocess)], ids=["1 rank", "2 ranks"]
)
@pytest.mark.parametrize("bad", ["word", "fields"])
def test_a_bad_row_after_quoted_lines_is_named_by_its_line_in_the_file(tmp_path, capsys, size, bad):
    """Quoted fields with line breaks in them: a record is more than one line, and the line
    named is the file's, counted past them, whichever rank parses the row (at 2 ranks, rank 1:
    the row is past the middle of the file's bytes)."""
    path = tmp_path / "notes.csv"
    line, text = notes_over_lines(path, bad)
    assert text.index("oops" if bad == "word" else "extra") > len(text) / 2  # rank 1's half
    assert text.splitlines()[line - 1].count(",") == 3 + (bad == "fields")
    args = ["--data", str(path), "--features", "a,b", "--target", "y", "--solver", "exact"]
    if size == 1:
        said = ERROR + refused(capsys, args)
    else:
        run = launch_each_rank_reporting("mpirun", size, args, tmp_path)
        assert run.codes == {0: 2, 1: 2}, run.output
        said = next(x for x in run.stderr.splitlines() if ERROR in x)
    if bad == "word":
        assert the_error(path, line).fullmatch(said), said
    else:
        assert said == f"{ERROR}{path} line {line}: 5 fields, but the header has 4"


def test_a_mixed_parquet_string_column_is_refused_naming_its_row(tmp_path, capsys):
    path = tmp_path / "mixed.parquet"
    b = [str(v) for v in np.linspace(-1, 1, 40)]
    b[17] = "oops"
    frame = pd.DataFrame({"a": np.arange(40.0), "b": b, "y": np.arange(40.0) % 7})
    frame.to_parquet(path, row_group_size=10)
    said = refused(capsys, ["--data", str(path)])
    assert said.startswith(f"{path} row 17: 'oops' in column 'b' is not a number")
    assert said.endswith(REMEDY)
    # numbers only, written as text: not a category either
    frame["b"] = [str(v) for v in np.linspace(-1, 1, 40)]
    frame.to_parquet(path, row_group_size=10)
    said = refused(capsys, ["--data", str(path)])
    assert "column 'b' is text whose every value reads as a number ('-0.02" in said
    # named in --categorical, its values are levels
    frame["b"] = ["north", "south", "east", "7"] * 10
    frame.to_parquet(path, row_group_size=10)
    out = tmp_path / "m.json"
    args = ["--data", str(path), "--categorical", "b", "--solver", "exact"]
    assert main([*args, "--metrics_json", str(out)]) == 0
    assert read_metrics(out)["features"] == ["a", "b[T.east]", "b[T.north]", "b[T.south]"]


@pytest.mark.multiprocess
def test_a_mixed_parquet_column_stops_every_rank_naming_its_row(tmp_path):
    path = tmp_path / "mixed.parquet"
    b = [str(v) for v in np.linspace(-1, 1, 400)]
    b[350] = "oops"  # in the last rank's share of the row groups
    pd.DataFrame({"a": np.arange(400.0), "b": b, "y": np.arange(400.0) % 7}).to_parquet(
        path, row_group_size=50
    )
    run = launch_each_rank_reporting("mpirun", 3, ["--data", str(path)], tmp_path)
    assert run.codes == {0: 2, 1: 2, 2: 2}, run.output
    assert f"{path} row 350: 'oops' in column 'b'" in run.stderr
    assert "Traceback" not in run.output


def test_fit_refuses_a_dataframe_column_of_numbers_as_text_with_a_word(capsys):
    from hvd_linreg import UsageError, fit
    from hvd_linreg.estimators import LinearRegression

    rng = np.random.default_rng(1)
    X = pd.DataFrame({"a": rng.standard_normal(30), "b": [f"{v:.3f}" for v in rng.random(30)]})
    X.loc[12, "b"] = "oops"
    y = rng.standard_normal(30)
    message = "row 12: 'oops' in column 'b' is not a number, but the column"
    with pytest.raises(UsageError, match=re.escape(message)):
        fit(X, y)
    with pytest.raises(ValueError, match=re.escape(message)):
        LinearRegression().fit(X, y)
    X["b"] = X["b"].astype(object).where(X.index != 12, 0.25)  # a number among the texts
    X.loc[3, "b"] = "typo"
    with pytest.raises(UsageError, match=re.escape("row 3: 'typo'")):
        fit(X, y)


def test_predict_and_evaluate_refuse_a_word_where_the_model_has_numbers(tmp_path, capsys):
    train = numbers_with_a_word(tmp_path / "train.csv", 400, 2, word="0.5")  # no word
    model = tmp_path / "model"
    assert main(["--data", str(train), "--solver", "exact", "--export", str(model), "--quiet"]) == 0
    new = numbers_with_a_word(tmp_path / "new.csv", 50, 40)
    use = ["--model", str(model), "--data", str(new)]
    for argv in (["predict", *use, "--out", str(tmp_path / "p.csv")], ["evaluate", *use]):
        said = refused(capsys, argv)
        assert said.startswith(f"{new} line 40: 'oops' is not a number (column 'b')"), said


def test_a_column_of_unique_codes_is_not_a_category(tmp_path, capsys):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(500)
    codes = [f"C{i:05d}" for i in rng.permutation(500)]
    codes[:100] = codes[100:200]  # 400 distinct codes in 500 rows: still an ID
    path = tmp_path / "customers.csv"
    path.write_text(
        "customer,x,y\n" + "".join(f"{c},{v!r},{2 * v!r}\n" for c, v in zip(codes, x.tolist()))
    )
    message = (
        "column 'customer' has 400 distinct values in 500 rows: a column with more levels than "
        "half its rows is an ID or free text, not a category (whatever --max_levels says)"
    )
    assert message in refused(capsys, ["--data", str(path), "--max_levels", "100000"])
    # numbers named as levels are held to the same rule
    named = ["--data", str(path), "--features", "x", "--categorical", "x"]
    assert "column 'x' has 500 distinct values in 500 rows" in refused(capsys, named)


@pytest.mark.multiprocess
def test_real_word_columns_and_named_numbers_still_equal_statsmodels(tmp_path):
    """Region names are a category with nothing named, a numeric code named in --categorical
    is coded as levels, and the fit at 1 and 3 ranks equals statsmodels' formula fit."""
    import statsmodels.formula.api as smf

    rng = np.random.default_rng(4)
    n = 600
    frame = pd.DataFrame(
        {
            "region": rng.choice(["North", "South", "East", "West Coast"], n),
            "x": rng.standard_normal(n),
            "year": rng.choice([2019, 2020, 2021], n),
        }
    )
    frame["y"] = (
        1
        + 2 * frame.x
        + frame.region.map({"North": 0, "South": 1, "East": -1, "West Coast": 3})
        + 0.5 * (frame.year - 2020)
        + rng.standard_normal(n)
    )
    path = tmp_path / "regions.csv"
    frame.to_csv(path, index=False)
    reference = smf.ols("y ~ C(region) + x + C(year)", frame).fit()
    expected = {re.sub(r"^C\((\w+)\)", r"\1", k): v for k, v in reference.params.items()}
    args = ["--data", str(path), "--categorical", "year", "--solver", "exact"]
    one = tmp_path / "one.json"
    assert main([*args, "--quiet", "--metrics_json", str(one)]) == 0
    three = launch("mpirun", 3, args, tmp_path)
    assert three.returncode == 0, three.output
    for metrics in (read_metrics(one), three.metrics):
        ours = {c["name"]: c["estimate"] for c in metrics["statistics"]["coefficients"]}
        assert set(ours) == set(expected)
        for name, value in ours.items():
            np.testing.assert_allclose(value, expected[name], rtol=1e-9, err_msg=name)
