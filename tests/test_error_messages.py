"""Every user-facing error message is raised by some test: the ones no other file reaches. The
command line's end with exit 2 and the one line checked here (conftest.refused); the library's
raise UsageError with that line; the estimators' raise ValueError, as scikit-learn's do. Ranks
that pass fit() columns which do not agree, and estimators that refuse at two ranks, are
launched under mpirun (tests/errors_job.py)."""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pandas as pd
import pytest

import hvd_linreg
from conftest import REPO, launch, refused
from hvd_linreg import estimators
from hvd_linreg.cli import main
from hvd_linreg.model_file.export import METADATA


def _csv(path, text: str) -> str:
    path.write_text(text)
    return str(path)


ROWS = "".join(f"{i % 7},{(i * 3) % 5},{i % 4},{i % 3 + 1},{0.5 * i}\n" for i in range(40))
TABLE = "a,b,c,w,y\n" + ROWS
WORDS = "a,g,y\n" + "".join(f"{i % 7},{'pq'[i % 2]},{0.5 * i + i % 3}\n" for i in range(40))


@pytest.fixture
def table(tmp_path) -> str:
    return _csv(tmp_path / "t.csv", TABLE)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--cv", "3", "--fold_column", "c", "--alpha", "0.1"], "--cv and --fold_column both "),
        (["--l2", "0.1", "--alpha", "0.1"], "--l2 and --alpha are two penalties: give one ("),
        (["--cov_type", "HC0", "--alpha", "0.1"], "--cov_type HC0 is for an unpenalized fit: a "),
        (["--weights", "w,c"], "--weights takes one column name, got 'w,c'"),
        (["--features", "a,b", "--weights", "a"], "--weights names 'a', which --features"),
    ],
)
def test_flags_that_contradict_each_other(flags, message, table, capsys):
    assert message in refused(capsys, ["--data", table, "--solver", "exact", *flags])


def test_a_file_with_no_column_left_for_a_feature(tmp_path, capsys):
    path = _csv(tmp_path / "t.csv", "w,y\n1,2\n2,3\n3,5\n")
    assert refused(capsys, ["--data", path, "--weights", "w", "--solver", "exact"]) == (
        f"{path} has no column left for a feature; columns: w, y"
    )


def test_an_npz_whose_weights_are_not_one_value_per_row(tmp_path, capsys):
    path = tmp_path / "d.npz"
    np.savez(path, X=np.ones((10, 2)), y=np.ones(10), w=np.ones((10, 2)))
    assert refused(capsys, ["--data", str(path), "--weights", "w"]) == (
        f"{path}: array 'w' must hold one value per row, (10,); got (10, 2)"
    )


def test_a_directory_holding_a_directory(tmp_path, capsys):
    (tmp_path / "parts" / "inner").mkdir(parents=True)
    _csv(tmp_path / "parts" / "a.csv", TABLE)
    error = refused(capsys, ["--data", str(tmp_path / "parts")])
    assert f"is not a file: --data {tmp_path / 'parts'} reads files, not sub-directories" in error


@pytest.mark.parametrize(
    "text, message",
    [
        ("num_steps = \n", "is not valid TOML: "),
        ("num_stepz = 5\n", "unknown key 'num_stepz'; keys are the flags' names"),
    ],
)
def test_a_bad_config_file(text, message, tmp_path, capsys):
    path = _csv(tmp_path / "c.toml", text)
    assert f"--config {path}" in refused(capsys, ["--config", path])
    assert message in refused(capsys, ["--config", path])


@pytest.mark.parametrize(
    "rows, message",
    [
        (
            "a,b,w,y\n" + "".join(f"{i},{i % 3},0,{i}\n" for i in range(20)),
            "no row has a weight above 0",
        ),
        ("a,b,w,y\n" + "".join(f"1,2,1,{i}\n" for i in range(20)), "every feature is constant"),
    ],
)
def test_an_elastic_net_path_with_nothing_to_fit(rows, message, tmp_path, capsys):
    path = _csv(tmp_path / "t.csv", rows)
    argv = ["--data", path, "--weights", "w", "--solver", "exact", "--l1_ratio", "0.5"]
    assert message in refused(capsys, argv)


# --- predict and evaluate on files that cannot say what the model needs -----------------


def _export(tmp_path, data: str, *flags: str) -> str:
    model = str(tmp_path / "model")
    assert main(["--data", data, "--solver", "exact", "--quiet", "--export", model, *flags]) == 0
    return model


def test_predict_on_npy_refuses_a_model_with_levels(tmp_path, capsys):
    model = _export(tmp_path, _csv(tmp_path / "g.csv", WORDS), "--categorical", "g")
    np.save(tmp_path / "new.npy", np.ones((3, 2)))
    argv = ["predict", "--model", model, "--data", str(tmp_path / "new.npy")]
    assert refused(capsys, [*argv, "--out", str(tmp_path / "p.npy")]) == (
        f"the model {model} codes the column g as levels: {tmp_path / 'new.npy'} must name its "
        "columns, as a CSV file with a header or a Parquet file does"
    )


def test_predict_on_npy_refuses_a_model_with_an_offset(tmp_path, table, capsys):
    model = _export(tmp_path, table, "--features", "a,b", "--offset", "c", "--model", "poisson")
    np.save(tmp_path / "new.npy", np.ones((3, 2)))
    argv = ["predict", "--model", model, "--data", str(tmp_path / "new.npy")]
    assert refused(capsys, [*argv, "--out", str(tmp_path / "p.npy")]) == (
        f"the model {model} adds the column 'c' (--offset) to each row's linear predictor: "
        f"{tmp_path / 'new.npy'} must name it, as a CSV file with a header does"
    )


@pytest.mark.parametrize("named", [True, False], ids=["csv", "npy"])
def test_evaluate_without_the_target(named, tmp_path, table, capsys):
    model = _export(tmp_path, table, "--features", "a,b", "--target", "y")
    if named:
        new, what = (
            _csv(tmp_path / "new.csv", "a,b\n1,2\n3,4\n"),
            "no column y (the model's target)",
        )
    else:
        new, what = str(tmp_path / "new.npy"), "only the model's 2 features"
        np.save(new, np.ones((3, 2)))
    error = refused(capsys, ["evaluate", "--model", model, "--data", new])
    assert error == f"{new} has {what}; evaluate needs the target too"


@pytest.mark.parametrize(
    "formula, header, missing",
    [
        ("np.log(y + 1) ~ a + b", "a,b", "column 'y'"),
        ("I(y / w) ~ a + b", "a,b,y", "column 'w'"),
        ("I(y / w) ~ a + b", "a,b", "columns 'w', 'y'"),
    ],
    ids=["expression", "one of two", "both"],
)
def test_evaluate_without_the_columns_a_formulas_target_reads(
    formula, header, missing, tmp_path, table, capsys
):
    """The error names the file's columns that are missing, as the user wrote them, and the
    left side that reads them: not the left side as if it were a column."""
    model = _export(tmp_path, table, "--formula", formula)
    cells = ",".join(["1"] * len(header.split(",")))
    new = _csv(tmp_path / "new.csv", f"{header}\n{cells}\n{cells}\n")
    lhs = formula.split(" ~ ")[0]
    assert refused(capsys, ["evaluate", "--model", model, "--data", new]) == (
        f"{new} has no {missing}, which the model's target {lhs} reads; evaluate needs the "
        "target too"
    )


def _edit_metadata(model: str, change) -> None:
    path = f"{model}/{METADATA}"
    with open(path) as f:
        meta = json.load(f)
    change(meta)
    with open(path, "w") as f:
        json.dump(meta, f)


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda m: m.update(format="other"), "its format is 'other', not "),
        (lambda m: m.update(model="cauchy"), "its model family 'cauchy' is not one this version"),
        (lambda m: m.update(w=m["w"][:1]), "w does not have num_features values"),
        (lambda m: m.update(formula="y ~ a"), "by an earlier version, which did not keep what"),
        (None, "Expecting value: line 1 column 1"),
    ],
    ids=["format", "family", "w", "old formula", "not JSON"],
)
def test_a_corrupt_exports_metadata(change, reason, tmp_path, table, capsys):
    model = _export(tmp_path, table, "--features", "a,b")
    if change is None:
        with open(f"{model}/{METADATA}", "w") as f:
            f.write("")
    else:
        _edit_metadata(model, change)
    argv = ["predict", "--model", model, "--data", table, "--out", str(tmp_path / "p.npy")]
    error = refused(capsys, argv)
    assert error.startswith(f"cannot read --model {model}'s metadata ({METADATA}): ")
    assert reason in error


# --- the library ---------------------------------------------------------------------------

X = np.arange(40.0).reshape(20, 2) % 7
Y = X @ [1.0, -2.0] + np.arange(20) % 3


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: hvd_linreg.fit(X, Y, cv=3, fold=X[:, 0] % 3, solver="exact"), "cv= or fold=, not"),
        (lambda: hvd_linreg.fit("y ~ a"), "fit(formula) takes data=, the DataFrame whose"),
        (lambda: hvd_linreg.fit("y ~ a", data={"a": X[:, 0]}), "takes data as a pandas"),
        (lambda: hvd_linreg.fit(X[:0], Y[:0]), "fit() was given no rows on any rank"),
        (lambda: hvd_linreg.fit(X, Y[:5]), "X has 20 rows but y has 5"),
        (lambda: hvd_linreg.fit(X.astype(object), Y), "X holds object values, not numbers"),
        (lambda: hvd_linreg.fit([[1, 2], [3]], Y), "X is not an array of numbers: "),
    ],
    ids=["cv and fold", "no data", "data not a frame", "no rows", "lengths", "strings",
         "ragged"],
)  # fmt: skip
def test_the_library_refuses(call, message):
    with pytest.raises(hvd_linreg.UsageError, match=re.escape(message)):
        call()


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"offset": Y[:5], "missing": "drop"}, "the rows given have different lengths: [5, 20]"),
        ({"model": "poisson", "start": "abc"}, "start= must be numbers, [w..., b]"),
        ({"fold": np.ones(20), "l1_ratio": 0.5}, "holds one fold (1); cross-validation needs at"),
    ],
    ids=["lengths to drop from", "start not numbers", "one fold"],
)
def test_the_library_refuses_a_setting_for_these_rows(settings, message):
    with pytest.raises(hvd_linreg.UsageError, match=re.escape(message)):
        hvd_linreg.fit(X, Y + 20, solver="exact", **settings)


FRAME = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "y": Y})


@pytest.mark.parametrize(
    "formula, message",
    [
        ("y + a ~ b", "the formula 'y + a ~ b' must have one column on its left side"),
        ("y ~ (a", "the formula 'y ~ (a' does not parse: "),
    ],
)
def test_a_formula_the_library_cannot_build(formula, message):
    with pytest.raises(hvd_linreg.UsageError, match=re.escape(message)):
        hvd_linreg.fit(formula, data=FRAME, solver="exact")


def test_a_formula_without_formulaic_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "formulaic", None)  # what an install without it raises
    with pytest.raises(hvd_linreg.UsageError, match=re.escape("a formula needs formulaic: pip")):
        hvd_linreg.fit("y ~ a", data=FRAME, solver="exact")


def test_a_class_target_with_a_missing_value():
    fruit = pd.Series(np.where(X[:, 0] > 3, "p", "q")).where(np.arange(20) != 3)
    with pytest.raises(hvd_linreg.UsageError, match=re.escape("row 3: no ")):
        hvd_linreg.fit(FRAME[["a", "b"]], fruit, model="multinomial", solver="exact", quiet=True)


def test_new_rows_for_a_formula_with_levels():
    words = FRAME.assign(g=np.where(X[:, 0] > 3, "p", "q"))
    fitted = hvd_linreg.fit("y ~ a + C(g)", data=words, solver="exact")
    takes = "a model fitted from the formula 'y ~ a + C(g)' takes a DataFrame"
    with pytest.raises(hvd_linreg.UsageError, match=re.escape(takes) + "$"):
        fitted.predict(np.ones((3, 2)))
    with pytest.raises(hvd_linreg.UsageError, match=re.escape("row 0: 'z' ")):
        fitted.predict(FRAME.assign(g="z"))


def test_predicting_rows_without_the_models_columns():
    by_formula = hvd_linreg.fit("y ~ a + b", data=FRAME, solver="exact")
    with pytest.raises(hvd_linreg.UsageError, match=re.escape("the rows have no column b, wh")):
        by_formula.predict(FRAME[["a"]])
    words = FRAME.assign(g=np.where(X[:, 0] > 3, "p", "q"))
    by_frame = hvd_linreg.fit(words[["a", "g"]], words.y, solver="exact")
    with pytest.raises(hvd_linreg.UsageError, match="X has no column g; the model's are a, g"):
        by_frame.predict(words[["a"]])
    with pytest.raises(hvd_linreg.UsageError, match="X has 3 features; the model has 2"):
        hvd_linreg.fit(X, Y, solver="exact").predict(np.ones((2, 3)))


@pytest.mark.parametrize(
    "estimator, message",
    [
        (estimators.LogisticRegression(C=0), "C must be a number > 0, got 0"),
        (estimators.LogisticRegression(C="big"), "C must be a number > 0, got 'big'"),
        (estimators.PoissonRegressor(tol=-1e-4), "tol must be a number > 0, got -0.0001"),
        (estimators.GammaRegressor(max_iter=0), "max_iter must be an integer >= 1, got 0"),
        (estimators.LogisticRegression(max_iter=2.5), "max_iter must be an integer >= 1, got 2.5"),
    ],
)
def test_an_estimators_bad_parameter(estimator, message):
    y = (Y > np.median(Y)).astype(float) if "Logistic" in type(estimator).__name__ else Y + 20
    with pytest.raises(ValueError, match=re.escape(message)):
        estimator.fit(X, y)


E = estimators  # short, for the table below
YB = (Y > np.median(Y)).astype(float)
# cv= as scikit-learn's (train, test) pairs: two test sets that overlap; a row in no test set
OVERLAPPING = [(np.arange(10), np.arange(5, 20)), (np.arange(10, 20), np.arange(10))]
SHORT = [(np.arange(10, 20), np.arange(10)), (np.arange(10), np.arange(10, 15))]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: E.LogisticRegression().fit(X, np.zeros(20)), "needs 2 or more classes, got 1 "),
        (lambda: E.LogisticRegressionCV(penalty=None).fit(X, YB), "penalty=None is not supported"),
        (lambda: E.LogisticRegressionCV(Cs=0).fit(X, YB), "count >= 1 or a list of C, got 0"),
        (lambda: E.LogisticRegressionCV(Cs=[]).fit(X, YB), "Cs must be a count >= 1 or a non-em"),
        (lambda: E.LinearRegression().fit(X[:1], Y[:1]), "needs at least 2 samples, got 1 sample"),
        (lambda: E.Ridge().fit(X, Y, sample_weight=0 * Y), "every sample_weight is zero: there"),
        (lambda: E.TweedieRegressor(link="logit").fit(X, Y + 20), "link='logit': use 'auto', 'id"),
        (lambda: E.GeneralizedLinearRegressor(family="t").fit(X, Y), "family='t' is not supported"),
        (lambda: E.ElasticNetCV(eps=2).fit(X, Y), "eps must be below 1, got 2"),
        (lambda: E.ElasticNetCV(alphas=0).fit(X, Y), "alphas must be an integer >= 1, got 0"),
        (lambda: E.ElasticNetCV(alphas=[0.1, -1]).fit(X, Y), "each of alphas must be a number >="),
        (lambda: E.ElasticNetCV(cv=30).fit(X, Y), "Cannot have number of splits n_splits=30 grea"),
        (lambda: E.LassoCV(cv=OVERLAPPING).fit(X, Y), "cv's test sets must not overlap, nor a tes"),
        (lambda: E.LassoCV(cv=SHORT).fit(X, Y), "cv's splits must put every row in one test set"),
        (lambda: E.LogisticRegressionCV(cv=5).fit(X[:6], YB[:6]), "=5 cannot be greater than the"),
    ],
    ids=["one class", "CV penalty", "Cs count", "Cs empty", "one sample", "no weight", "link",
         "family", "eps", "alphas count", "alphas values", "more folds than rows",
         "overlapping folds", "row in no fold", "more folds than a class"],
)  # fmt: skip
def test_an_estimator_refuses_what_it_cannot_fit(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


@pytest.mark.multiprocess
def test_ranks_passing_fit_or_an_estimator_rows_that_do_not_agree(tmp_path):
    out = tmp_path / "errors.json"
    program = (sys.executable, str(REPO / "tests" / "errors_job.py"), str(out))
    run = launch("mpirun", 2, [], tmp_path, metrics=False, program=program)
    assert run.returncode == 0, run.output
    expected = [
        "the ranks passed different columns to fit(): rank 0 (a, b), rank 1 (a, c)",
        "column 'g' is a category column on some ranks but not on every rank: give every "
        "rank's column the same dtype",
        "column 'g' has the categories ['p', 'q'] on rank 0 but ['q', 'p'] on rank 1: give "
        "every rank the same CategoricalDtype (its order sets the reference level)",
        "UsageError: LinearRegression needs at least 2 samples, got 1 sample (seen on rank 1)",
        "ValueError: under a launcher, cv is a number of folds (KFold over all the rows)",
    ]
    assert json.loads(out.read_text()) == [expected, expected]  # each on every rank: no hang


def test_keep_columns_from_a_file_gone_since_it_was_opened(tmp_path):
    """predict opens the data first and reads the kept columns after predicting: a file that
    is gone by then (moved, or its disk unmounted) is a clear error, not a traceback."""
    from hvd_linreg.errors import UsageError
    from hvd_linreg.model_file.predict import open_data, read_kept

    data = open_data(_csv(tmp_path / "t.csv", TABLE))
    (tmp_path / "t.csv").unlink()
    with pytest.raises(UsageError, match=r"cannot read --keep_columns from .*t\.csv: .*No such"):
        read_kept(data, ["a"], 40)


def test_coordinate_descent_that_does_not_settle(monkeypatch):
    """The sweeps' limit (10,000 in use) reached: the message says what to change. Two sweeps
    cannot settle a nearly collinear pair at a weak penalty."""
    from hvd_linreg.errors import UsageError
    from hvd_linreg.solvers import coordinate_descent

    rng = np.random.default_rng(3)
    x = rng.normal(size=200)
    X = np.c_[x, x + 1e-3 * rng.normal(size=200), rng.normal(size=200)]
    y = X @ [1.0, 1.0, 0.5] + rng.normal(size=200)
    monkeypatch.setattr(coordinate_descent, "MAX_SWEEPS", 2)
    with pytest.raises(UsageError, match="coordinate descent did not settle in 2 sweeps: the "):
        hvd_linreg.fit(X, y, solver="exact", alpha=1e-4, l1_ratio=0.5)


def test_newton_for_classes_that_does_not_converge(monkeypatch):
    """Without --max_iter, Newton's method for K classes that runs out of iterations (100 in
    use) names the classes' separation as the likely cause."""
    from hvd_linreg.errors import UsageError
    from hvd_linreg.solvers import multinomial

    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 2))
    y = np.array(["a", "b", "c"])[np.argmax(X @ [[1.0, -1.0, 0.2], [0.5, 0.3, -1.0]], axis=1)]
    y[:30] = rng.choice(["a", "b", "c"], 30)  # not separated: a finite optimum, 7 iterations
    monkeypatch.setattr(multinomial, "MAX_ITERATIONS", 1)
    with pytest.raises(UsageError, match="Newton's method did not converge in 1 iterations: "):
        hvd_linreg.fit(X, y, model="multinomial", solver="exact")
    monkeypatch.undo()
    result = hvd_linreg.fit(X, y, model="multinomial", solver="exact")
    assert result.iterations > 1 and result.converged is True
    limited = hvd_linreg.fit(X, y, model="multinomial", solver="exact", max_iter=1)
    assert limited.iterations == 1 and limited.converged is False


def test_a_singular_hessian_says_why_by_the_rows_it_saturated():
    """IRLS ends on a singular design with the family's words: for logistic regression with
    saturated rows, their count and the separation they mark; else the collinear features.
    No fit was found that reaches the first (the steps saturate rows for 100 iterations before
    their weights leave a singular design), so the family's words are checked directly."""
    from hvd_linreg.families import get

    logistic = get("logistic")
    counts = {"misclassified": 2.0, "saturated": 19.0, "rows": 28}
    assert logistic.singular(counts, penalized=False) == (
        "the Hessian became singular: 19 of 28 rows have fitted probabilities of 0 or 1 while "
        "the coefficients keep growing: the classes are (quasi-)separated, and the likelihood "
        "has no finite maximum. Drop the feature(s) that separate them, or fit with --l2 > 0"
    )
    collinear = "the Hessian of the log-loss is singular: features are collinear or constant"
    assert logistic.singular(counts, penalized=True).startswith(collinear)
    assert logistic.singular({**counts, "saturated": 0.0}, penalized=False).startswith(collinear)
