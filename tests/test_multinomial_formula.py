"""--formula with --model multinomial: the left side names the target (its classes words), the
right side builds the columns as for the other models (C(), a word column, a stateful transform
learned from every rank's rows). Equal to statsmodels' smf.mnlogit at 1 and 2 ranks; the
exported model keeps the formula, so predict and evaluate build the same columns."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from test_multinomial import as_matrix

from conftest import refused, run_command, run_metrics

FORMULA = "fruit ~ center(x1) + np.log(size) + C(grade) + shop"
SIZES = [1, pytest.param(2, marks=pytest.mark.multiprocess)]


def baskets(n: int = 600, seed: int = 3) -> pd.DataFrame:
    """n rows: a number, a positive size, a grade 1..3 (sorted: a rank's rows lack some
    grades), a word column, an ID, and a fruit among three."""
    rng = np.random.default_rng(seed)
    x1, size = rng.normal(size=n), rng.uniform(0.5, 5, n)
    grade, shop = np.sort(rng.integers(1, 4, n)), rng.choice(["north", "south", "east"], n)
    D = np.column_stack([x1, np.log(size), grade == 2, grade == 3, shop == "south", np.ones(n)])
    eta = D @ rng.normal(scale=0.6, size=(6, 2))
    p = np.exp(np.column_stack([np.zeros(n), eta]))
    p /= p.sum(axis=1, keepdims=True)
    fruit = np.array(["apple", "fig", "kiwi"])[[rng.choice(3, p=row) for row in p]]
    ids = [f"b{i:03d}" for i in range(n)]
    return pd.DataFrame(
        {"id": ids, "x1": x1, "size": size, "grade": grade, "shop": shop, "fruit": fruit}
    )


def mnlogit(table: pd.DataFrame, formula: str = FORMULA):
    """statsmodels' formula fit: its left side must be numbers, the classes' (sorted) codes."""
    coded = table.assign(code=pd.Categorical(table.fruit).codes)
    model = smf.mnlogit(formula.replace("fruit", "code", 1), coded)
    return model.fit(method="newton", tol=1e-14, maxiter=100, disp=0)


def by_name(names) -> list[str]:
    """statsmodels' row names in the tool's order of names (its b is their Intercept)."""
    return ["Intercept" if name == "b" else name for name in names]


@pytest.mark.parametrize("size", SIZES)
def test_a_multinomial_formula_is_mnlogits_and_predict_rebuilds_its_columns(tmp_path, capsys, size):
    """Coefficients to 1e-8 and standard errors to 1e-6 of smf.mnlogit, by name; predict's
    probabilities (the IDs beside them) and evaluate's log-loss to 1e-8, at 1 and 2 ranks."""
    from sklearn.metrics import log_loss

    table = baskets()
    table.to_csv(tmp_path / "baskets.csv", index=False)
    model = tmp_path / "model"
    args = ["--data", str(tmp_path / "baskets.csv"), "--model", "multinomial", "--solver", "exact"]
    m = run_metrics(tmp_path, size, [*args, "--formula", FORMULA, "--export", str(model)])
    reference = mnlogit(table)
    assert m["classes"] == ["apple", "fig", "kiwi"]
    names = by_name([*m["features"], "b"])
    expected = reference.params.loc[names].to_numpy()
    np.testing.assert_allclose(as_matrix(m, "estimate"), expected, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(as_matrix(m, "std_error"), reference.bse.loc[names], rtol=1e-6)
    assert m["statistics"]["log_likelihood"] == pytest.approx(reference.llf, rel=1e-10)
    command = ["--model", str(model), "--data", str(tmp_path / "baskets.csv")]
    predict = ["predict", *command, "--out", str(tmp_path / "p.csv"), "--keep_columns", "id"]
    run_command(tmp_path, size, predict)
    got = pd.read_csv(tmp_path / "p.csv")
    probabilities = reference.predict(table).to_numpy()
    assert list(got.id) == list(table.id)
    np.testing.assert_allclose(got[["apple", "fig", "kiwi"]], probabilities, rtol=1e-8)
    out = tmp_path / "scores.json"
    run_command(tmp_path, size, ["evaluate", *command, "--metrics_json", str(out)])
    scores = json.loads(out.read_text())
    assert scores["log_loss"] == pytest.approx(log_loss(table.fruit, probabilities), rel=1e-8)


def test_fit_takes_a_multinomial_formula():
    import hvd_linreg

    table = baskets()
    result = hvd_linreg.fit(FORMULA, data=table, model="multinomial", solver="exact")
    reference = mnlogit(table)
    names = by_name(result.names)
    np.testing.assert_allclose(result.params, reference.params.loc[names], rtol=1e-8, atol=1e-10)
    new = table.iloc[::7]
    expected = reference.predict(new).to_numpy()
    np.testing.assert_allclose(result.predict_proba(new), expected, rtol=1e-8)


def test_a_multinomial_formula_names_its_target_as_it_is(tmp_path, capsys):
    table = baskets()
    table.to_csv(tmp_path / "baskets.csv", index=False)
    args = ["--data", str(tmp_path / "baskets.csv"), "--model", "multinomial", "--solver", "exact"]
    says = refused(capsys, [*args, "--formula", "C(fruit) ~ x1"])
    assert says == (
        "the formula 'C(fruit) ~ x1': the left side of a multinomial model names the target "
        "column, whose values are the classes ('fruit ~ x1 + x2'), not 'C(fruit)'"
    )
    says = refused(capsys, [*args, "--formula", "fruit ~ x1 - 1"])
    assert says == "a multinomial model without intercepts is not fitted yet"
    says = refused(capsys, [*args, "--formula", "basket ~ x1"])
    assert says == f"--data {tmp_path / 'baskets.csv'} has no column basket"
