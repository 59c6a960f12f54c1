"""The exact solvers' tolerance and iteration limit (--tol, --max_iter, fit()'s and the
estimators' tol and max_iter), the fit's convergence flag, and fit()'s warm start (start=)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import statsmodels.api as sm
from sklearn.exceptions import ConvergenceWarning

import hvd_linreg
from conftest import params_of, read_metrics, refused, run_metrics
from hvd_linreg import estimators
from hvd_linreg.errors import UsageError


def _poisson(n: int = 600) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    X = rng.standard_normal((n, 3))
    y = rng.poisson(np.exp(0.3 + X @ [0.5, -0.25, 0.1])).astype(np.float64)
    return X, y


@pytest.fixture
def poisson_file(tmp_path):
    X, y = _poisson()
    np.savez(tmp_path / "p.npz", X=X, y=y)
    return ["--data", str(tmp_path / "p.npz"), "--model", "poisson", "--solver", "exact"]


def _cli(capsys, argv: list[str], out) -> tuple[dict, str, str]:
    """hvd-linreg ARGV in this process, which must exit 0: its metrics, stdout, stderr."""
    from hvd_linreg.cli import main

    assert main([*argv, "--metrics_json", str(out)]) == 0
    stdout, stderr = capsys.readouterr()
    return read_metrics(out), stdout, stderr


def test_max_iter_stops_irls_unconverged_with_one_warning(poisson_file, tmp_path, capsys):
    """--max_iter 2: the run ends (exit 0) with the second iterate, converged false in the
    metrics and the summary, and one warning line; by default it converges, true."""
    done, out, err = _cli(capsys, poisson_file, tmp_path / "a.json")
    assert done["statistics"]["converged"] is True and "warning" not in err
    assert "did not converge" not in out
    cut, out, err = _cli(capsys, [*poisson_file, "--max_iter", "2"], tmp_path / "b.json")
    assert cut["statistics"]["converged"] is False
    assert cut["statistics"]["iterations"] == 2
    warned = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert warned == [
        "warning: Newton's method did not converge in 2 iterations: the coefficients and "
        "statistics are its last iterate's; raise --max_iter (or --tol)"
    ]
    assert "Newton: 2 iterations (did not converge: --max_iter)" in out
    assert np.abs(params_of(cut) - params_of(done)).max() > 1e-3


def test_max_iter_1_is_the_starting_model(tmp_path):
    """One iteration evaluates the intercept-only start and no more: w = 0, b = log ȳ."""
    X, y = _poisson()
    with pytest.warns(hvd_linreg.errors.ConvergenceWarning):
        result = hvd_linreg.fit(X, y, model="poisson", solver="exact", max_iter=1)
    assert result.converged is False and result.iterations == 1
    np.testing.assert_array_equal(result.params[:-1], 0.0)
    assert result.params[-1] == pytest.approx(np.log(y.mean()), abs=1e-15)


def test_defaults_are_the_constants_and_statsmodels_optimum():
    """tol=None and max_iter=None are 1e-10 and 100: the same iterations and the same bits as
    given explicitly, at statsmodels' optimum."""
    X, y = _poisson()
    default = hvd_linreg.fit(X, y, model="poisson", solver="exact")
    given = hvd_linreg.fit(X, y, model="poisson", solver="exact", tol=1e-10, max_iter=100)
    assert default.converged is True and default.iterations == given.iterations
    np.testing.assert_array_equal(default.params, given.params)
    reference = sm.GLM(y, sm.add_constant(X), family=sm.families.Poisson()).fit(tol=1e-14)
    theirs = np.append(reference.params[1:], reference.params[0])
    np.testing.assert_allclose(default.params, theirs, rtol=0, atol=1e-10)


def test_a_looser_tol_takes_fewer_iterations(poisson_file, tmp_path):
    tight = run_metrics(tmp_path, 1, poisson_file)
    loose = run_metrics(tmp_path, 1, [*poisson_file, "--tol", "1e-3"])
    assert loose["statistics"]["iterations"] < tight["statistics"]["iterations"]
    assert loose["statistics"]["converged"] is True
    np.testing.assert_allclose(params_of(loose), params_of(tight), rtol=0, atol=1e-3)


def test_least_squares_reports_converged_and_ignores_the_limits(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((50, 2))
    np.savez(tmp_path / "l.npz", X=X, y=X @ [1.0, -2.0] + rng.standard_normal(50))
    args = ["--data", str(tmp_path / "l.npz"), "--solver", "exact"]
    plain = run_metrics(tmp_path, 1, args)
    limited = run_metrics(tmp_path, 1, [*args, "--max_iter", "1", "--tol", "0.5"])
    assert plain["statistics"]["converged"] is True is limited["statistics"]["converged"]
    np.testing.assert_array_equal(params_of(plain), params_of(limited))


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--tol", "0"], "--tol must be > 0, got 0.0"),
        (["--tol", "nan"], "--tol must be a finite number, got nan"),
        (["--max_iter", "0"], "--max_iter must be a positive whole number, got 0"),
        (
            ["--solver", "sgd", "--max_iter", "5"],
            "--max_iter is for --solver exact's iterations: SGD runs --num_steps steps",
        ),
    ],
)
def test_the_flags_are_checked(poisson_file, capsys, flags, says):
    args = [*poisson_file, *flags] if "--solver" not in flags else [*poisson_file[:4], *flags]
    assert refused(capsys, args) == says


def test_warm_start_from_the_optimum_takes_at_most_two_iterations():
    X, y = _poisson()
    first = hvd_linreg.fit(X, y, model="poisson", solver="exact")
    again = hvd_linreg.fit(X, y, model="poisson", solver="exact", start=first.params)
    assert again.iterations <= 2 < first.iterations
    assert again.converged is True
    np.testing.assert_allclose(again.params, first.params, rtol=0, atol=1e-12)
    # from elsewhere: the same optimum
    far = hvd_linreg.fit(X, y, model="poisson", solver="exact", start=[0.1, 0.1, 0.1, 0.0])
    np.testing.assert_allclose(far.params, first.params, rtol=0, atol=1e-12)


def test_a_start_of_the_wrong_shape_or_for_no_irls_is_refused():
    X, y = _poisson()
    with pytest.raises(UsageError, match=r"start= must be \[w\.\.\., b\], 4 numbers for 3"):
        hvd_linreg.fit(X, y, model="poisson", solver="exact", start=[0.0, 0.0, 0.0])
    with pytest.raises(UsageError, match="start= must be finite numbers"):
        hvd_linreg.fit(X, y, model="poisson", solver="exact", start=[0.0, np.nan, 0.0, 0.0])
    with pytest.raises(UsageError, match="start= is where IRLS or Newton.s method begins"):
        hvd_linreg.fit(X, y, solver="exact", start=[0.0, 0.0, 0.0, 0.0])


def test_fits_warning_is_a_python_warning():
    X, y = _poisson()
    with pytest.warns(hvd_linreg.errors.ConvergenceWarning, match="did not converge in 2"):
        hvd_linreg.fit(X, y, model="poisson", solver="exact", max_iter=2)


def test_the_estimators_max_iter_and_tol_reach_irls():
    X, y = _poisson()
    with pytest.warns(ConvergenceWarning, match="did not converge in 1 iteration:"):
        cut = estimators.PoissonRegressor(alpha=0.0, max_iter=1).fit(X, y)
    assert cut.n_iter_ == 1
    np.testing.assert_array_equal(cut.coef_, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default: converged, no warning at all
        done = estimators.PoissonRegressor(alpha=0.0).fit(X, y)
    loose = estimators.PoissonRegressor(alpha=0.0, tol=1e-3).fit(X, y)
    assert loose.n_iter_ < done.n_iter_
    with pytest.warns(ConvergenceWarning):
        estimators.LogisticRegression(max_iter=1).fit(X, y > 1)


def test_the_paths_tol_and_max_iter_reach_it(poisson_file, tmp_path, capsys):
    """The elastic net: tol is coordinate descent's (and IRLS's tests keep their ratio to it),
    max_iter IRLS's at each strength, whose end unconverged is refused."""
    path = [*poisson_file, "--alpha", "0.01", "--l1_ratio", "0.5"]
    tight = run_metrics(tmp_path, 1, path)
    loose = run_metrics(tmp_path, 1, [*path, "--tol", "1e-4"])  # IRLS's step test at 0.1
    assert loose["passes"] < tight["passes"]
    assert not np.allclose(params_of(loose), params_of(tight), rtol=0, atol=1e-6)
    assert tight["statistics"]["converged"] is True
    np.testing.assert_allclose(params_of(loose), params_of(tight), rtol=0, atol=1e-3)
    assert refused(capsys, [*path, "--max_iter", "1"]) == (
        "the penalized IRLS did not converge in 1 iterations at alpha 0.01; raise --max_iter"
    )


def test_the_paths_tol_is_coordinate_descents(tmp_path):
    """A lasso on least squares, all coordinate descent and no IRLS: a loose tol stops its
    sweeps early on correlated features, the default solves it to the last digits."""
    rng = np.random.default_rng(2)
    z = rng.standard_normal((400, 1))
    X = z + 0.1 * rng.standard_normal((400, 4))
    np.savez(tmp_path / "c.npz", X=X, y=X @ [1.0, 0.5, -0.5, 0.2] + rng.standard_normal(400))
    lasso = ["--data", str(tmp_path / "c.npz"), "--solver", "exact", "--alpha", "0.01"]
    exact = run_metrics(tmp_path, 1, lasso)
    same = run_metrics(tmp_path, 1, [*lasso, "--tol", "1e-13"])
    loose = run_metrics(tmp_path, 1, [*lasso, "--tol", "1e-2"])
    np.testing.assert_array_equal(params_of(same), params_of(exact))
    assert np.abs(params_of(loose) - params_of(exact)).max() > 1e-6


@pytest.mark.multiprocess
def test_max_iter_reaches_every_rank_alike(poisson_file, tmp_path):
    """At 2 ranks under mpirun, --max_iter 3 stops every rank at the same iterate: the same
    coefficients as 1 rank's, converged false."""
    args = [*poisson_file, "--max_iter", "3"]
    one = run_metrics(tmp_path, 1, args)
    two = run_metrics(tmp_path, 2, args)
    assert two["size"] == 2
    for metrics in (one, two):
        assert metrics["statistics"]["converged"] is False
        assert metrics["statistics"]["iterations"] == 3
    np.testing.assert_allclose(params_of(two), params_of(one), rtol=0, atol=1e-12)
    converged = run_metrics(tmp_path, 1, poisson_file)
    assert np.abs(params_of(two) - params_of(converged)).max() > 1e-6
