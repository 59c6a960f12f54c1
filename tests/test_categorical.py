"""Categorical columns (data/categorical.py): a CSV column with words in it, or one that
--categorical names, enters the model as treatment dummies named as patsy names them, with the
same levels at any rank count, and the fit equals statsmodels' formula fit with C(...)."""

from __future__ import annotations

import csv
import io
import json
import re

import numpy as np
import pytest

from conftest import launch, read_metrics
from hvd_linreg.cli import main


@pytest.fixture(scope="module")
def grunfeld(tmp_path_factory):
    """statsmodels' Grunfeld investment data: 11 firms by name, 20 years, as pandas writes it.
    Its rows are sorted by firm, so at 2 and 3 ranks each rank parses only some firms."""
    import statsmodels.api as sm

    df = sm.datasets.grunfeld.load_pandas().data
    df["year"] = df["year"].astype(int)
    path = tmp_path_factory.mktemp("categorical") / "grunfeld.csv"
    df[["firm", "year", "value", "capital", "invest"]].to_csv(path, index=False)
    return path, df


@pytest.fixture(scope="module")
def affairs(tmp_path_factory):
    """statsmodels' fair data with its occupation code turned into words and a binary target
    (any time in affairs), as a pandas category column written to CSV."""
    import statsmodels.api as sm

    df = sm.datasets.fair.load_pandas().data
    words = {1: "student", 2: "farming", 3: "white collar", 4: "teacher", 5: "manager", 6: "pro"}
    df["occupation"] = df["occupation"].astype(int).map(words).astype("category")
    df["rate_marriage"] = df["rate_marriage"].astype(int)
    df["affair"] = (df["affairs"] > 0).astype(int)
    path = tmp_path_factory.mktemp("categorical") / "affairs.csv"
    columns = ["age", "yrs_married", "occupation", "rate_marriage", "affair"]
    df[columns].to_csv(path, index=False)
    return path, df


GRUNFELD_ARGS = ["--features", "value,capital,firm,year", "--categorical", "year"]


def by_name(metrics: dict) -> dict[str, tuple[float, float]]:
    """The fit's coefficients by name, statsmodels' way: the intercept is 'Intercept'."""
    return {
        "Intercept" if c["name"] == "b" else c["name"]: (c["estimate"], c["std_error"])
        for c in metrics["statistics"]["coefficients"]
    }


def assert_statsmodels(metrics: dict, ref, rtol: float = 1e-8) -> None:
    """The same coefficients and standard errors by name; patsy's C(year) is our year."""
    ours = by_name(metrics)
    names = [re.sub(r"^C\((\w+)\)", r"\1", n) for n in ref.params.index]
    assert sorted(ours) == sorted(names)
    for name, estimate, se in zip(names, ref.params, ref.bse):
        np.testing.assert_allclose(ours[name], (estimate, se), rtol=rtol, err_msg=name)


def statsmodels_grunfeld(df):
    import statsmodels.formula.api as smf

    return smf.ols("invest ~ value + capital + firm + C(year)", df).fit()


def test_ols_with_words_and_codes_equals_statsmodels_formula(grunfeld, tmp_path, capsys):
    path, df = grunfeld
    out = tmp_path / "m.json"
    args = ["--data", str(path), *GRUNFELD_ARGS, "--solver", "exact", "--metrics_json", str(out)]
    assert main(args) == 0
    m = read_metrics(out)
    assert_statsmodels(m, statsmodels_grunfeld(df))
    assert m["features"][:4] == [
        "value",
        "capital",
        "firm[T.Atlantic Refining]",
        "firm[T.Chrysler]",
    ]  # the reference level, American Steel, has no column
    assert m["features"][-1] == "year[T.1954]" and len(m["features"]) == 2 + 10 + 19
    assert "220 samples x 31 features" in capsys.readouterr().out


@pytest.mark.multiprocess
@pytest.mark.parametrize("size", [2, 3])
def test_every_rank_count_gives_the_same_dummies(grunfeld, tmp_path, size):
    """Sorted by firm, the file gives each rank only some firms: the agreed levels are still
    all of them, in the same order."""
    path, df = grunfeld
    run = launch(
        "mpirun", size, ["--data", str(path), *GRUNFELD_ARGS, "--solver", "exact"], tmp_path
    )
    assert run.returncode == 0, run.output
    assert_statsmodels(run.metrics, statsmodels_grunfeld(df))


def test_logit_with_a_category_column_equals_statsmodels(affairs, tmp_path):
    import statsmodels.formula.api as smf

    path, df = affairs
    out = tmp_path / "m.json"
    args = ["--data", str(path), "--model", "logistic", "--categorical", "rate_marriage"]
    assert main([*args, "--solver", "exact", "--metrics_json", str(out)]) == 0
    formula = "affair ~ age + yrs_married + occupation + C(rate_marriage)"
    ref = smf.logit(formula, df).fit(disp=0, tol=1e-12)
    assert_statsmodels(read_metrics(out), ref, rtol=1e-6)


@pytest.mark.multiprocess
def test_logit_sgd_on_three_ranks_trains_on_the_dummies(affairs, tmp_path):
    """SGD sees the dummies as features too: its model has them, by name."""
    path, _ = affairs
    args = ["--data", str(path), "--model", "logistic", "--num_steps", "20", "--quiet"]
    run = launch("mpirun", 3, args, tmp_path)
    assert run.returncode == 0, run.output
    assert run.metrics["features"] == [
        "age",
        "yrs_married",
        *(f"occupation[T.{w}]" for w in ["manager", "pro", "student", "teacher", "white collar"]),
        "rate_marriage",
    ]


@pytest.fixture
def late_word(tmp_path):
    """A column of numbers until its last row, which holds a word: a typo unless the column
    is named in --categorical (test_typos.py). Named, on 3 ranks the first ranks see numbers
    only, and must still code the column's numbers as words ('1', not 1.0)."""
    rng = np.random.default_rng(5)
    n = 90
    g = rng.integers(1, 4, n).astype(str).astype(object)
    g[-1] = "other"
    x = rng.standard_normal(n)
    y = 2 * x + (g == "2") + 3 * (g == "other") + 0.1 * rng.standard_normal(n)
    path = tmp_path / "late.csv"
    path.write_text(
        "x,g,y\n" + "".join(f"{a!r},{b},{c!r}\n" for a, b, c in zip(x.tolist(), g, y.tolist()))
    )
    return path


@pytest.mark.multiprocess
def test_a_named_column_with_a_word_on_one_rank_is_words_on_all(late_word, tmp_path):
    one = tmp_path / "one.json"
    args = ["--data", str(late_word), "--categorical", "g", "--solver", "exact"]
    assert main([*args, "--metrics_json", str(one)]) == 0
    run = launch("mpirun", 3, args, tmp_path)
    assert run.returncode == 0, run.output
    names = ["x", "g[T.2]", "g[T.3]", "g[T.other]"]
    assert read_metrics(one)["features"] == run.metrics["features"] == names
    np.testing.assert_allclose(run.metrics["w"], read_metrics(one)["w"], rtol=1e-10)


def test_predict_and_evaluate_code_new_rows_with_the_models_levels(grunfeld, tmp_path, capsys):
    path, df = grunfeld
    model = tmp_path / "model"
    args = ["--data", str(path), *GRUNFELD_ARGS, "--solver", "exact", "--export", str(model)]
    assert main([*args, "--quiet"]) == 0
    meta = json.loads((model / "assets.extra" / "hvd_linreg.json").read_text())
    assert meta["levels"]["firm"][0] == "American Steel" and len(meta["levels"]["firm"]) == 11
    assert meta["levels"]["year"] == list(range(1935, 1955))
    assert meta["columns"] == ["value", "capital", "firm", "year"]
    assert meta["missing"] == "error"
    # a few rows, two firms only, columns in another order: coded by the model's levels
    new = df.iloc[[5, 30, 31, 200]]
    data = tmp_path / "new.csv"
    new[["year", "firm", "capital", "value", "invest"]].to_csv(data, index=False)
    out = tmp_path / "p.csv"
    assert main(["predict", "--model", str(model), "--data", str(data), "--out", str(out)]) == 0
    predicted = np.loadtxt(out, skiprows=1)
    np.testing.assert_allclose(predicted, statsmodels_grunfeld(df).predict(new), rtol=1e-9)
    # a level the model never saw
    bad = new.copy()
    bad.iloc[2, bad.columns.get_loc("firm")] = "Ford"
    bad[["year", "firm", "capital", "value", "invest"]].to_csv(data, index=False)
    capsys.readouterr()
    assert main(["evaluate", "--model", str(model), "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert f"{data} line 4: 'Ford' in column 'firm' is not one of the levels the model was " in err
    assert "Traceback" not in err


def test_a_column_with_too_many_levels_is_refused_naming_it(tmp_path, capsys):
    path = tmp_path / "ids.csv"
    path.write_text("id,x,y\n" + "".join(f"c{i % 30},{i},{i % 3}\n" for i in range(90)))
    assert main(["--data", str(path), "--max_levels", "20"]) == 2
    err = capsys.readouterr().err
    assert "column 'id' has 30 levels, more than --max_levels 20" in err
    assert "Traceback" not in err


@pytest.mark.multiprocess
def test_too_many_levels_stop_every_rank(tmp_path):
    path = tmp_path / "ids.csv"
    path.write_text("id,x,y\n" + "".join(f"c{i % 250},{i},{i % 3}\n" for i in range(600)))
    run = launch("mpirun", 2, ["--data", str(path), "--max_levels", "100"], tmp_path, metrics=False)
    assert run.returncode == 2, run.output
    assert "column 'id' has at least 250 levels, more than --max_levels 100" in run.stderr
    assert "Traceback" not in run.output


def test_unused_columns_are_not_read(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text('note,x,y\n"free, text",1,2\n,2,3.9\nmore words,3,6.1\n')
    out = tmp_path / "m.json"
    args = ["--data", str(path), "--features", "x", "--batch_size", "3"]
    assert main([*args, "--metrics_json", str(out)]) == 0
    assert read_metrics(out)["features"] == ["x"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--categorical", "z"], "--categorical 'z' is not a column of "),
        (["--categorical", "y"], "--categorical 'y' is not one of the run's features"),
        (["--categorical", "g,g"], "--categorical takes distinct column names"),
        (["--max_levels", "0"], "--max_levels must be a positive whole number"),
    ],
)
def test_categorical_settings_that_cannot_apply_are_refused(args, message, tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text("x,g,y\n1,a,2\n2,b,3\n3,a,5\n")
    assert main(["--data", str(path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_categorical_needs_a_csv_file(tmp_path, capsys):
    assert main(["--categorical", "g"]) == 2
    assert "--categorical names columns of a CSV or Parquet file, so it needs --data" in (
        capsys.readouterr().err
    )
    np.savez(tmp_path / "d.npz", X=np.ones((4, 1)), y=np.ones(4))
    assert main(["--data", str(tmp_path / "d.npz"), "--categorical", "g"]) == 2
    assert "--categorical codes the named columns of CSV and Parquet files as levels" in (
        capsys.readouterr().err
    )


def test_a_word_in_the_target_is_not_a_level(tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text("x,g,y\n1,a,2\n2,b,yes\n")
    assert main(["--data", str(path)]) == 2
    assert f"{path} line 3: 'yes' is not a number (column 'y')" in capsys.readouterr().err


def test_missing_levels_stop_the_run_or_drop_their_rows(tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text("x,g,y\n1,a,2\n2,NA,3\n3,b,5\n4,a,6\n5,,7\n6,c,8\n7,a,9\n8,b,9\n")
    assert main(["--data", str(path)]) == 2
    assert f"{path} line 3: a missing value ('NA') in column 'g'" in capsys.readouterr().err
    out = tmp_path / "m.json"
    args = ["--data", str(path), "--missing", "drop", "--solver", "exact"]
    assert main([*args, "--metrics_json", str(out)]) == 0
    m = read_metrics(out)
    assert (m["num_samples"], m["rows_dropped_missing"]) == (6, 2)
    assert m["features"] == ["x", "g[T.b]", "g[T.c]"]


def test_a_resume_with_other_levels_is_refused(tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    path = tmp_path / "d.csv"
    path.write_text("x,g,y\n" + "".join(f"{i},{'ab'[i % 2]},{i}\n" for i in range(20)))
    args = ["--batch_size", "4", "--checkpoint_every", "10", "--checkpoint_dir", str(ckpt)]
    assert main(["--data", str(path), *args, "--num_steps", "10", "--quiet"]) == 0
    path.write_text("x,g,y\n" + "".join(f"{i},{'ac'[i % 2]},{i}\n" for i in range(20)))
    capsys.readouterr()
    assert main(["--data", str(path), *args, "--num_steps", "20", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"the checkpoint in {ckpt} is for other features: its 'g[T.b]' is this data's " in err


@pytest.fixture(scope="module")
def grunfeld_parquet(grunfeld):
    """The same rows as Parquet, as pandas writes it: firm a category (dictionary) column, a
    boolean column, and row groups of 50 rows."""
    path, df = grunfeld
    df = df.assign(firm=df["firm"].astype("category"), large=df["value"] > 1000)
    out = path.with_suffix(".parquet")
    df[["firm", "year", "large", "value", "capital", "invest"]].to_parquet(
        out, index=False, row_group_size=50
    )
    return out, df


@pytest.mark.parametrize("size", [1, 2, 3])
@pytest.mark.multiprocess
def test_parquet_category_string_and_boolean_columns_equal_statsmodels(
    grunfeld_parquet, tmp_path, size
):
    import statsmodels.formula.api as smf

    path, df = grunfeld_parquet
    args = ["--data", str(path), "--target", "invest", "--categorical", "year", "--solver", "exact"]
    run = launch("mpirun", size, args, tmp_path)
    assert run.returncode == 0, run.output
    ref = smf.ols("invest ~ firm + C(year) + large + value + capital", df).fit()
    assert_statsmodels(run.metrics, ref)
    assert "large[T.True]" in run.metrics["features"]


@pytest.mark.multiprocess
def test_predict_on_parquet_codes_its_words_and_booleans_with_the_models_levels(
    grunfeld_parquet, tmp_path, capsys
):
    import statsmodels.formula.api as smf

    path, df = grunfeld_parquet
    model = tmp_path / "model"
    args = ["--data", str(path), "--target", "invest", "--categorical", "year"]
    assert main([*args, "--solver", "exact", "--export", str(model), "--quiet"]) == 0
    # a few rows in another order of columns, two firms only: their levels are the model's
    new = df.iloc[[5, 30, 31, 200]]
    data = tmp_path / "new.parquet"
    columns = ["large", "year", "capital", "firm", "value", "invest"]
    new[columns].to_parquet(data, index=False, row_group_size=3)
    out = tmp_path / "p.npy"
    assert main(["predict", "--model", str(model), "--data", str(data), "--out", str(out)]) == 0
    ref = smf.ols("invest ~ firm + C(year) + large + value + capital", df).fit()
    np.testing.assert_allclose(np.load(out), ref.predict(new), rtol=1e-9)
    # two ranks: each reads its block of rows from the row groups that hold them (3 and 1)
    args = ["predict", "--model", str(model), "--data", str(data), "--out", str(out)]
    run = launch("mpirun", 2, args, tmp_path, metrics=False)
    assert run.returncode == 0, run.output
    np.testing.assert_allclose(np.load(out), ref.predict(new), rtol=1e-9)
    # a level the model never saw, in the second row group
    bad = new.assign(firm=new["firm"].astype(str))
    bad.iloc[3, bad.columns.get_loc("firm")] = "Ford"
    bad[columns].to_parquet(data, index=False, row_group_size=3)
    capsys.readouterr()
    assert main(["evaluate", "--model", str(model), "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert f"{data} row 3: 'Ford' in column 'firm' is not one of the levels " in err
    assert "Traceback" not in err


def test_a_parquet_column_with_too_many_levels_is_refused_naming_it(tmp_path, capsys):
    import pandas as pd

    path = tmp_path / "ids.parquet"
    pd.DataFrame({"id": [f"c{i % 30}" for i in range(90)], "y": np.arange(90.0)}).to_parquet(path)
    assert main(["--data", str(path), "--max_levels", "20"]) == 2
    err = capsys.readouterr().err
    assert "column 'id' has 30 levels, more than --max_levels 20" in err
    assert "Traceback" not in err


@pytest.fixture
def quoted(tmp_path):
    """CSV as RFC 4180 writes it (Python's csv module): a firm with a comma and quotes in its
    name, and a note of free text with line breaks, commas and quotes, which byte ranges at
    any rank count cut through."""
    rng = np.random.default_rng(8)
    firms = ["Smith, Jones & Co", 'The "Best" Ltd', "Plain"]
    path = tmp_path / "quoted.csv"
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["note", "firm", "x", "y"])
        for i in range(200):
            note = f'line one of {i}\nline "two", with a comma\n' * (i % 3)
            x = float(rng.standard_normal())
            out.writerow([note, firms[i % 3], x, 2 * x + i % 3 + float(rng.standard_normal())])
    return path


@pytest.mark.parametrize("size", [2, 3, 4, 5, 7])
def test_quoted_line_breaks_stay_inside_their_record_at_any_rank_count(quoted, size):
    """Given the quotes ahead of each rank's bytes (split_quotes' sum), the ranks' texts are
    the file's records, each once, in order, wherever a range starts inside a quoted field."""
    from hvd_linreg.data import csv_header, csv_split_texts

    header = csv_header(quoted)
    data = quoted.read_bytes()[header.data_start :]
    texts = []
    for rank in range(size):
        before = data[: rank * len(data) // size].count(b'"')
        texts += [
            t for _, t in csv_split_texts([(quoted, header.data_start)], rank, size, {0: before})
        ]
    assert "".join(texts) == data.decode()
    records = [list(csv.reader(io.StringIO(t, newline=""))) for t in texts]
    assert [r for part in records for r in part] == list(
        csv.reader(io.StringIO(data.decode(), newline=""))
    )


@pytest.mark.multiprocess
def test_quoted_fields_give_the_same_rows_on_three_ranks(quoted, tmp_path):
    one = tmp_path / "one.json"
    args = ["--data", str(quoted), "--features", "firm,x", "--solver", "exact"]
    assert main([*args, "--metrics_json", str(one)]) == 0
    run = launch("mpirun", 3, args, tmp_path)
    assert run.returncode == 0, run.output
    ones = read_metrics(one)
    assert (
        run.metrics["features"]
        == ones["features"]
        == [
            "firm[T.Smith, Jones & Co]",
            'firm[T.The "Best" Ltd]',
            "x",
        ]
    )
    assert run.metrics["num_samples"] == 200
    np.testing.assert_allclose(run.metrics["w"], ones["w"], rtol=1e-10)


def test_rows_parsed_in_parts_give_the_same_shard(late_word, tmp_path, monkeypatch, capsys):
    """A split is parsed PARSE_ROWS rows at a time: with parts of 7 rows, the word in the
    last part still makes the whole named column words (unnamed, a typo named by its line),
    and rows dropped or refused in later parts are named by their own lines."""
    from hvd_linreg.data import csv_parse as csv_reader

    named = ["--data", str(late_word), "--categorical", "g", "--solver", "exact"]
    whole = tmp_path / "whole.json"
    assert main([*named, "--metrics_json", str(whole)]) == 0
    monkeypatch.setattr(csv_reader, "PARSE_ROWS", 7)
    monkeypatch.setattr(csv_reader, "parse_split", lambda *args: None)  # the tool's own parser
    parts = tmp_path / "parts.json"
    assert main([*named, "--metrics_json", str(parts)]) == 0
    assert read_metrics(parts)["features"] == read_metrics(whole)["features"]
    np.testing.assert_allclose(read_metrics(parts)["w"], read_metrics(whole)["w"], rtol=1e-12)
    capsys.readouterr()
    assert main(["--data", str(late_word), "--solver", "exact"]) == 2
    assert f"{late_word} line 91: 'other' in column 'g' is not a number" in capsys.readouterr().err
    lines = late_word.read_text().splitlines()
    for line in (20, 40):  # x empty on the file's lines 21 and 41 (parts 3 and 6)
        lines[line] = "," + lines[line].split(",", 1)[1]
    late_word.write_text("\n".join(lines) + "\n")
    assert main(named) == 2
    assert f"{late_word} line 21: a missing value ('') in column 'x'" in capsys.readouterr().err
    assert main([*named, "--missing", "drop", "--metrics_json", str(parts)]) == 0
    assert (read_metrics(parts)["num_samples"], read_metrics(parts)["rows_dropped_missing"]) == (
        88,
        2,
    )
