"""Every user-facing error message is raised by some test, continued from
tests/test_error_messages.py: the command line's refusals that no other file reaches, each
through cli.main in this process (conftest.refused: exit 2 and the one line). Flags whose values
or company a run cannot take; predict on a multinomial model, on a file with no column names for
--keep_columns, or on a Parquet file whose column the model coded as numbered levels; and the
fits that find a problem in the rows: a held-out row's target (logistic's check and Family's),
a class missing from a fold's training rows of a multinomial path, a multinomial path with
nothing to fit, and IRLS stopping on a logistic optimum that is not one (quasi-separation)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_logistic import quasi_separated

from conftest import refused
from hvd_linreg.cli import main

ROWS = "".join(f"{i % 7},{(i * 3) % 5},{i % 4},{i % 3 + 1},{0.5 * i}\n" for i in range(40))
TABLE = "a,b,c,w,y\n" + ROWS


def _csv(path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.fixture
def table(tmp_path) -> str:
    return _csv(tmp_path / "t.csv", TABLE)


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--solver", "exact", "--l1_ratio", "0.5", "--alpha_min_ratio", "1.5"],
            "--alpha_min_ratio must be a number in (0, 1), got 1.5",
        ),
        (
            ["--model", "tweedie", "--tweedie_power", "2.5"],
            "--tweedie_power must be a number between 1 and 2 (exclusive), got 2.5",
        ),
        (
            ["--formula", "y ~ a", "--elastic"],
            "--elastic reads --data's columns as --features names them: --formula is for "
            "plain runs",
        ),
        (["--no_such_flag"], "unrecognized arguments: --no_such_flag (see --help)"),
    ],
    ids=["alpha_min_ratio", "tweedie_power", "elastic formula", "unknown flag"],
)
def test_a_flag_the_run_cannot_take(flags, message, table, capsys):
    assert refused(capsys, ["--data", table, *flags]) == message


def test_weights_of_a_file_of_unnamed_numbers(tmp_path, capsys):
    data = tmp_path / "x.npy"
    np.save(data, np.ones((10, 3)))
    assert refused(capsys, ["--data", str(data), "--weights", "w", "--solver", "exact"]) == (
        "--weights names a column of a CSV or Parquet file, or an array of a .npz file (beside "
        "X and y); a .npy file has neither: save the arrays in one .npz (np.savez(path, X=X, "
        "y=y, weight=w))"
    )


# --- predict ---------------------------------------------------------------------------------


def _export(tmp_path, data: str, *flags: str) -> str:
    model = str(tmp_path / "model")
    assert main(["--data", data, "--solver", "exact", "--quiet", "--export", model, *flags]) == 0
    return model


def test_keep_columns_of_a_file_without_names(tmp_path, table, capsys):
    model = _export(tmp_path, table, "--features", "a,b")
    data = tmp_path / "new.npy"
    np.save(data, np.ones((3, 2)))
    argv = ["predict", "--model", model, "--data", str(data), "--out", str(tmp_path / "p.csv")]
    assert refused(capsys, [*argv, "--keep_columns", "a"]) == (
        f"--keep_columns names columns of a CSV or Parquet file; {data} has no names"
    )


def test_keep_columns_of_a_file_whose_lines_are_not_rows(tmp_path, table, capsys):
    """A line of spaces: the reader of numbers passes over it, the CSV module reads it as a
    row of one empty-looking cell."""
    model = _export(tmp_path, table, "--features", "a,b")
    data = _csv(tmp_path / "new.csv", "a,b,name\n1,2,x\n   \n3,4,y\n")
    argv = ["predict", "--model", model, "--data", data, "--out", str(tmp_path / "p.csv")]
    assert refused(capsys, [*argv, "--keep_columns", "name"]) == (
        f"{data}: --keep_columns read 3 rows but the model predicted 2; the file's lines are "
        "not one row each"
    )


def test_keep_columns_with_a_cell_longer_than_the_csv_modules_limit(tmp_path, table, capsys):
    """A kept column's cell of 200,000 characters (the csv module's default limit is 131,072)
    is a user's text like any other: copied beside its prediction as the file writes it."""
    import csv

    model = _export(tmp_path, table, "--features", "a,b")
    note = "word " * 40_000
    data = _csv(tmp_path / "new.csv", f'a,b,note\n1,2,"{note}"\n3,4,short\n')
    out = tmp_path / "p.csv"
    argv = ["predict", "--model", model, "--data", data, "--out", str(out)]
    assert main([*argv, "--keep_columns", "note"]) == 0
    assert "Traceback" not in "".join(capsys.readouterr())
    assert pd.read_csv(out, dtype=str).note.tolist() == [note, "short"]
    assert csv.field_size_limit() == 131072  # the module's limit is left as it was


@pytest.fixture
def fruit(tmp_path) -> pd.DataFrame:
    """Three classes that two features tell apart, but not perfectly."""
    rng = np.random.default_rng(0)
    table = pd.DataFrame({"x1": rng.standard_normal(60), "x2": rng.standard_normal(60)})
    apple = table.x1 + rng.standard_normal(60) > 0.5
    pear = table.x2 + rng.standard_normal(60) > 0
    return table.assign(fruit=np.where(apple, "apple", np.where(pear, "pear", "plum")))


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--threshold", "0.5"], "--threshold is for a model of two classes; this one has several"),
        (["--out", "p.npy"], "--out p.npy: a multinomial model's predictions are written as .csv"),
    ],
    ids=["threshold", "npy"],
)
def test_predict_with_a_multinomial_model(flags, message, fruit, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fruit.to_csv("fruit.csv", index=False)
    model = _export(tmp_path, "fruit.csv", "--model", "multinomial")
    argv = ["predict", "--model", model, "--data", "fruit.csv", "--out", "p.csv", *flags]
    assert refused(capsys, argv) == message


def test_predict_on_words_where_the_model_has_numbered_levels(tmp_path, table, capsys):
    model = _export(tmp_path, table, "--features", "a,c", "--categorical", "c")
    data = tmp_path / "new.parquet"
    pq.write_table(pa.table({"a": [1.0, 2.0], "c": ["x", "y"]}), data)
    argv = ["predict", "--model", model, "--data", str(data), "--out", str(tmp_path / "p.npy")]
    assert refused(capsys, argv) == (
        f"{data}: column 'c' is string, but the model's levels of it are numbers"
    )


# --- problems found in the rows --------------------------------------------------------------


@pytest.mark.parametrize(
    "model, bad, needs",
    [
        ("logistic", 2, "a target of 0 or 1, or of two values read as 0 and 1 (here 0 and 1)"),
        ("poisson", -1, "y >= 0"),
    ],
)
def test_a_held_out_rows_target_that_the_model_cannot_take(model, bad, needs, tmp_path, capsys):
    """Row 1 is one that --validation_fraction 0.5 holds out (docs/data.md's hash): the
    training rows' targets are all fine, so the held-out one is the first problem found. The
    logistic family checks its targets itself, the others by Family's check."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 2))
    y = (X[:, 0] + rng.standard_normal(40) > 0).astype(float)
    y[1] = bad
    data = tmp_path / "d.npz"
    np.savez(data, X=X, y=y)
    argv = ["--data", str(data), "--model", model, "--solver", "exact"]
    assert refused(capsys, [*argv, "--validation_fraction", "0.5"]) == (
        f"{data}: a held-out row's target is {bad}; --model {model} needs {needs}"
    )


MULTINOMIAL_PATH = ["--model", "multinomial", "--features", "x1,x2", "--target", "fruit"]


@pytest.mark.parametrize(
    "labels, plum",
    [({}, "'plum'"), ({"apple": 10, "pear": 20, "plum": 30}, "30")],
    ids=["words", "numbers"],
)
def test_a_class_missing_from_a_folds_training_rows(labels, plum, fruit, tmp_path, capsys):
    """The class is named by its label in the file (the third class: not its index 2)."""
    folds = np.where(fruit.fruit == "plum", 1, np.arange(len(fruit)) % 3 + 1)  # plums: fold 1
    data = tmp_path / "fruit.csv"
    labelled = [labels.get(f, f) for f in fruit.fruit]
    fruit.assign(fold=folds, fruit=labelled).to_csv(data, index=False)
    argv = ["--data", str(data), "--solver", "exact", *MULTINOMIAL_PATH, "--l1_ratio", "0.5"]
    assert refused(capsys, [*argv, "--fold_column", "fold"]) == (
        f"class {plum} has no row of weight above 0 in the training rows of fold 1: a "
        "multinomial path needs every class in every fold's training rows"
    )


@pytest.mark.parametrize(
    "change, message",
    [
        ({"w": 0.0}, "no row has a weight above 0: there is nothing to fit"),
        ({"x1": 1.0, "x2": 2.0}, "every feature is constant: there is no path to fit"),
    ],
    ids=["no weight", "constant"],
)
def test_a_multinomial_path_with_nothing_to_fit(change, message, fruit, tmp_path, capsys):
    data = tmp_path / "fruit.csv"
    fruit.assign(w=1.0).assign(**change).to_csv(data, index=False)
    argv = ["--data", str(data), "--solver", "exact", *MULTINOMIAL_PATH, "--weights", "w"]
    assert refused(capsys, [*argv, "--l1_ratio", "0.5"]) == message


def test_a_logistic_optimum_that_quasi_separation_fakes(tmp_path, capsys):
    """tests/test_logistic.py's quasi-separated rows: at the default --tol IRLS runs out of
    iterations; at --tol 0.1 its steps settle, and the check of the information at that point
    refuses it (the message alone, with no 'did not converge' before it)."""
    argv = ["--data", quasi_separated(tmp_path)[0], "--model", "logistic", "--solver", "exact"]
    assert re.fullmatch(
        r"\d+ of 200 rows have fitted probabilities of 0 or 1 while the coefficients keep "
        r"growing: the classes are \(quasi-\)separated, and the likelihood has no finite "
        r"maximum\. Drop the feature\(s\) that separate them, or fit with --l2 > 0",
        refused(capsys, [*argv, "--tol", "0.1"]),
    )
